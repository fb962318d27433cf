//! The MCP server over a fake backend, driven by rmcp's own client through an in-memory pipe:
//! what it lists (a snapshot of the tools' names, schemas and hints), how calls are routed
//! and how each outcome goes on the wire (`isError` results, JSON-RPC errors).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_mcp::server::{
    AgentRequest, Backend, BackendError, CallContext, ExposedTool, NewTask, RunOutcome,
};
use keel_types::{
    ApprovalRecord, ErrorCode, ErrorInfo, Event, RequestId, RunFilter, RunRecord, RunStatus,
    TaskRecord, ToolSpec,
};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode as RpcCode};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{ServiceExt, model::JsonObject};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A backend that answers from fixed data and records what it was asked.
#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<String>>,
}

impl Fake {
    fn note(&self, what: String) {
        self.asked.lock().unwrap().push(what);
    }
}

fn outcome(status: RunStatus, output: Option<&str>, error: Option<ErrorInfo>) -> RunOutcome {
    RunOutcome {
        request_id: RequestId::from("run_1".to_owned()),
        status,
        output: output.map(str::to_owned),
        error,
    }
}

#[async_trait]
impl Backend for Fake {
    fn tools(&self) -> Result<Vec<ExposedTool>, BackendError> {
        let spec = |name: &str, description: &str| ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        Ok(vec![
            ExposedTool {
                spec: spec("read_file", "Read a file."),
                read_only: true,
                idempotent: true,
                destructive: None,
            },
            ExposedTool {
                spec: spec("shell", "Run a command."),
                read_only: false,
                idempotent: false,
                destructive: None,
            },
            // An upstream MCP server's tool that says it destroys nothing, with a nullable
            // optional property.
            ExposedTool {
                spec: ToolSpec {
                    name: "mcp__tracker__update_issue".into(),
                    description: "Update an issue.".into(),
                    parameters: json!({
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer"},
                            "title": {"type": ["string", "null"]}
                        },
                        "required": ["id"]
                    }),
                },
                read_only: false,
                idempotent: false,
                destructive: Some(false),
            },
            // Could be mistaken for an agent: not listed, not callable.
            ExposedTool {
                spec: spec("agent__sneaky", "A tool named like an agent."),
                read_only: false,
                idempotent: false,
                destructive: None,
            },
        ])
    }

    fn agents(&self) -> Vec<String> {
        vec!["assistant".into()]
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        self.note(format!("call {name} {arguments} owner={:?}", cx.owner));
        Ok(match name {
            "read_file" => outcome(RunStatus::Completed, Some("hello"), None),
            _ => {
                let refusal = json!({"error": "tool call denied by policy (policy/p)", "reason": "no shell here"});
                let error = ErrorInfo::new(ErrorCode::ToolBlocked, refusal.to_string());
                outcome(RunStatus::Failed, None, Some(error))
            }
        })
    }

    async fn run_agent(
        &self,
        request: AgentRequest,
        _cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        self.note(format!(
            "agent {} {} {:?}",
            request.agent, request.input, request.session
        ));
        match request.session.as_deref() {
            Some("bad session") => Err(BackendError::InvalidParams("invalid session id".into())),
            _ => Ok(outcome(RunStatus::Completed, Some("The answer."), None)),
        }
    }

    async fn create_task(&self, task: NewTask) -> Result<TaskRecord, BackendError> {
        self.note(format!("create {} {}", task.tool, task.arguments));
        Err(BackendError::Internal("the store is gone".into()))
    }

    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, BackendError> {
        self.note(format!("get {id}"));
        Ok(None)
    }

    async fn update_task(&self, id: &str, _patch: &Value) -> Result<TaskRecord, BackendError> {
        Err(BackendError::Failed(format!("no task `{id}`")))
    }

    async fn run_task(&self, id: &str, _cx: &CallContext) -> Result<RunOutcome, BackendError> {
        Err(BackendError::Failed(format!("no task `{id}`")))
    }

    async fn delete_task(&self, _id: &str) -> Result<bool, BackendError> {
        Ok(true)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, BackendError> {
        self.note(format!(
            "runs status={:?} limit={:?}",
            filter.status, filter.limit
        ));
        let mut run = RunRecord::new(RequestId::from("run_1".to_owned()), None, "assistant", "hi");
        run.started_at = "2026-01-01T00:00:00.000Z".into();
        Ok(vec![run])
    }

    async fn run_events(
        &self,
        _id: &RequestId,
        _after: u64,
    ) -> Result<Option<Vec<Event>>, BackendError> {
        Ok(None)
    }

    async fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>, BackendError> {
        Ok(Vec::new())
    }
}

/// A client session on a server over `fake`, through an in-memory pipe.
async fn connect(fake: Arc<Fake>) -> RunningService<RoleClient, ()> {
    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(keel_mcp::server::serve_io(
        fake,
        server_read,
        server_write,
        CancellationToken::new(),
    ));
    let (client_read, client_write) = tokio::io::split(client_side);
    ().serve((client_read, client_write)).await.unwrap()
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let arguments: JsonObject = serde_json::from_value(arguments).unwrap();
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn text(result: &CallToolResult) -> &str {
    result.content[0]
        .as_text()
        .map(|t| t.text.as_str())
        .unwrap()
}

fn rpc_error(error: ServiceError) -> (RpcCode, String) {
    match error {
        ServiceError::McpError(error) => (error.code, error.message.into_owned()),
        other => panic!("not a JSON-RPC error: {other}"),
    }
}

#[tokio::test]
async fn the_server_names_itself_and_lists_workspace_tools_agents_and_its_own() {
    let client = connect(Arc::default()).await;
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("keel")
    );
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.resources.is_none() && info.capabilities.prompts.is_none());
    let tools = client.list_all_tools().await.unwrap();
    let listed: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    insta::assert_json_snapshot!("tools_list", listed);
}

/// Whether `schema` holds a `type` array with `null` anywhere.
fn has_nullable_type_array(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("type")
                .and_then(Value::as_array)
                .is_some_and(|types| types.iter().any(|t| t == "null"))
                || map.values().any(has_nullable_type_array)
        }
        Value::Array(items) => items.iter().any(has_nullable_type_array),
        _ => false,
    }
}

#[tokio::test]
async fn hints_pass_through_and_schemas_have_no_nullable_type_arrays() {
    let client = connect(Arc::default()).await;
    let tools = client.list_all_tools().await.unwrap();
    let tool = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(tool).unwrap()
    };
    // The upstream server's word: not read-only, not destructive.
    let update = tool("mcp__tracker__update_issue");
    assert_eq!(update["annotations"]["destructiveHint"], false, "{update}");
    assert_eq!(update["annotations"]["readOnlyHint"], false, "{update}");
    assert_eq!(
        update["inputSchema"]["properties"]["title"],
        json!({"type": "string"})
    );
    assert!(
        tool("shell")["annotations"]
            .get("destructiveHint")
            .is_none()
    );
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert!(!has_nullable_type_array(&schema), "{}: {schema}", tool.name);
    }
    // The server's own tools' optional arguments stay optional.
    let runs = tool("keel__runs_list");
    assert_eq!(
        runs["inputSchema"]["properties"]["status"]["type"], "string",
        "{runs}"
    );
    assert!(
        !runs["inputSchema"]["properties"]["status"]["enum"]
            .as_array()
            .unwrap()
            .contains(&Value::Null)
    );
}

#[tokio::test]
async fn calls_are_routed_by_name_and_outcomes_are_results() {
    let fake = Arc::new(Fake::default());
    let client = connect(fake.clone()).await;

    let read = client
        .call_tool(call("read_file", json!({"path": "README.md"})))
        .await
        .unwrap();
    assert_eq!((read.is_error, text(&read)), (Some(false), "hello"));
    assert_eq!(read.structured_content.unwrap()["requestId"], "run_1");

    let denied = client
        .call_tool(call("shell", json!({"command": "ls"})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));
    assert_eq!(
        text(&denied),
        "tool call denied by policy (policy/p): no shell here"
    );

    let answer = client
        .call_tool(call(
            "agent__assistant",
            json!({"input": "hi", "session": "s1"}),
        ))
        .await
        .unwrap();
    assert_eq!(text(&answer), "The answer.");

    let runs = client
        .call_tool(call(
            "keel__runs_list",
            json!({"status": "failed", "limit": 5}),
        ))
        .await
        .unwrap();
    let structured = runs.structured_content.clone().unwrap();
    assert_eq!(structured["runs"][0]["requestId"], "run_1");
    assert_eq!(
        serde_json::from_str::<Value>(text(&runs)).unwrap(),
        structured
    );

    let missing = client
        .call_tool(call("keel__task_get", json!({"taskId": "task_x"})))
        .await
        .unwrap();
    assert_eq!(
        (missing.is_error, text(&missing)),
        (Some(true), "no task `task_x`")
    );

    let asked = fake.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            r#"call read_file {"path":"README.md"} owner=None"#,
            r#"call shell {"command":"ls"} owner=None"#,
            r#"agent assistant hi Some("s1")"#,
            "runs status=Some(Failed) limit=Some(5)",
            "get task_x",
        ]
    );
}

#[tokio::test]
async fn what_cannot_be_routed_is_a_json_rpc_error() {
    let fake = Arc::new(Fake::default());
    let client = connect(fake.clone()).await;
    let cases = [
        (
            "no_such_tool",
            json!({}),
            RpcCode::INVALID_PARAMS,
            "unknown tool `no_such_tool`",
        ),
        (
            "agent__sneaky",
            json!({}),
            RpcCode::INVALID_PARAMS,
            "unknown tool `agent__sneaky`",
        ),
        (
            "agent__nobody",
            json!({"input": "x"}),
            RpcCode::INVALID_PARAMS,
            "unknown tool",
        ),
        (
            "agent__assistant",
            json!({"text": "x"}),
            RpcCode::INVALID_PARAMS,
            "invalid arguments for `agent__assistant`",
        ),
        (
            "agent__assistant",
            json!({"input": "x", "session": "bad session"}),
            RpcCode::INVALID_PARAMS,
            "invalid session id",
        ),
        (
            "keel__runs_list",
            json!({"limit": 0}),
            RpcCode::INVALID_PARAMS,
            "`limit` must be between 1 and 100",
        ),
        (
            "keel__runs_list",
            json!({"status": "sleeping"}),
            RpcCode::INVALID_PARAMS,
            "sleeping",
        ),
        (
            "keel__task_create",
            json!({"tool": "shell"}),
            RpcCode::INTERNAL_ERROR,
            "the store is gone",
        ),
    ];
    for (tool, arguments, code, message) in cases {
        let error = client.call_tool(call(tool, arguments)).await.unwrap_err();
        let (got_code, got_message) = rpc_error(error);
        assert_eq!(got_code, code, "{tool}: {got_message}");
        assert!(got_message.contains(message), "{tool}: {got_message}");
    }
    // Only the calls that parsed reached the backend.
    let asked = fake.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            r#"agent assistant x Some("bad session")"#,
            r#"create shell {}"#,
        ]
    );
}
