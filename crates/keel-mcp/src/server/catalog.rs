//! What the server lists, declared once: how each kind of tool is named, and [`CONTROL`], the
//! table of the server's own tools (tasks and read-only control-plane views, under
//! `keel__`). Their input schemas are generated from the very structs their arguments are
//! parsed into, so a schema cannot promise what the parser refuses.
//!
//! Every published schema is in its portable form ([`super::portable`]: no nullable `type`
//! arrays).
//!
//! Names: a workspace tool keeps its own name (`read_file`, `mcp__github__search`); an agent
//! is `agent__<name>`; the server's own tools start with `keel__`. A workspace tool whose name
//! starts with one of those prefixes is not listed (it could not be told apart).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::backend::ExposedTool;

/// The prefix of an agent's tool: `agent__<name>`.
pub(crate) const AGENT_PREFIX: &str = "agent__";

/// The prefix of the server's own tools.
pub(crate) const KEEL_PREFIX: &str = "keel__";

/// The server's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    TaskCreate,
    TaskGet,
    TaskUpdate,
    TaskRun,
    TaskDelete,
    RunsList,
    RunEvents,
    ApprovalsPending,
}

/// One of the server's own tools.
pub(crate) struct ControlTool {
    pub control: Control,
    pub name: &'static str,
    pub description: &'static str,
    /// It changes nothing (`readOnlyHint`).
    pub read_only: bool,
    /// It may remove something (`destructiveHint`; meaningful only when not read-only).
    pub destructive: bool,
    pub schema: fn() -> JsonObject,
}

/// Every tool of the server's own, in the order they are listed.
pub(crate) const CONTROL: &[ControlTool] = &[
    ControlTool {
        control: Control::TaskCreate,
        name: "keel__task_create",
        description: "Stage a call of a workspace tool as a task: Keel checks it (schema, policy, \
                      PreToolUse hooks) and records it with the decision (allow, deny or \
                      needs_approval) and the reasons. Nothing runs until keel__task_run.",
        read_only: false,
        destructive: false,
        schema: schema_of::<TaskCreateArgs>,
    },
    ControlTool {
        control: Control::TaskGet,
        name: "keel__task_get",
        description: "A staged task: its tool, arguments, decision, status and, once run, its \
                      run's id and output.",
        read_only: true,
        destructive: false,
        schema: schema_of::<TaskIdArgs>,
    },
    ControlTool {
        control: Control::TaskUpdate,
        name: "keel__task_update",
        description: "Patch a created task's arguments (JSON merge patch: null removes a field); \
                      Keel checks the call again and records the new decision.",
        read_only: false,
        destructive: false,
        schema: schema_of::<TaskUpdateArgs>,
    },
    ControlTool {
        control: Control::TaskRun,
        name: "keel__task_run",
        description: "Run a task whose decision is allow or needs_approval, as a recorded run \
                      (policy is checked again; a needed approval is waited for). Answers the \
                      tool's output and the run's request id.",
        read_only: false,
        destructive: false,
        schema: schema_of::<TaskIdArgs>,
    },
    ControlTool {
        control: Control::TaskDelete,
        name: "keel__task_delete",
        description: "Delete a task (a run it started stays recorded).",
        read_only: false,
        destructive: true,
        schema: schema_of::<TaskIdArgs>,
    },
    ControlTool {
        control: Control::RunsList,
        name: "keel__runs_list",
        description: "Recorded runs, newest first: id, agent, status, input, output, error, \
                      usage, times.",
        read_only: true,
        destructive: false,
        schema: runs_list_schema,
    },
    ControlTool {
        control: Control::RunEvents,
        name: "keel__run_events",
        description: "A run's recorded events in order (seq from 1), a page at a time: pass the \
                      answer's nextAfter as after for the next page.",
        read_only: true,
        destructive: false,
        schema: schema_of::<RunEventsArgs>,
    },
    ControlTool {
        control: Control::ApprovalsPending,
        name: "keel__approvals_pending",
        description: "Tool calls waiting for a human's approval (decide them with `keel \
                      approvals` or the HTTP API).",
        read_only: true,
        destructive: false,
        schema: schema_of::<NoArgs>,
    },
];

/// The server's own tool called `name`.
pub(crate) fn control(name: &str) -> Option<Control> {
    CONTROL.iter().find(|t| t.name == name).map(|t| t.control)
}

/// The agent an `agent__<name>` tool stands for.
pub(crate) fn agent_of(tool: &str) -> Option<&str> {
    tool.strip_prefix(AGENT_PREFIX)
}

/// Whether a workspace tool's name could be mistaken for one of the server's names.
pub(crate) fn is_reserved(name: &str) -> bool {
    name.starts_with(AGENT_PREFIX) || name.starts_with(KEEL_PREFIX)
}

/// Every tool the server lists: the workspace's, then one per agent, then its own.
pub(crate) fn listing(tools: Vec<ExposedTool>, agents: &[String], control: bool) -> Vec<Tool> {
    let mut listed: Vec<Tool> = tools
        .into_iter()
        .filter(|tool| !is_reserved(&tool.spec.name))
        .map(workspace_tool)
        .collect();
    listed.extend(agents.iter().map(|agent| agent_tool(agent)));
    if control {
        listed.extend(CONTROL.iter().map(control_tool));
    }
    listed
}

fn workspace_tool(tool: ExposedTool) -> Tool {
    let mut annotations = ToolAnnotations::new().read_only(tool.read_only);
    if tool.idempotent {
        annotations = annotations.idempotent(true);
    }
    // The tool's own word on destruction (an upstream MCP server's hint) goes on as it is.
    if let Some(destructive) = tool.destructive.filter(|_| !tool.read_only) {
        annotations = annotations.destructive(destructive);
    }
    let mut schema = match tool.spec.parameters {
        Value::Object(map) => map,
        // A tool without a usable schema still takes an object.
        _ => object_schema(),
    };
    super::portable::portable(&mut schema);
    Tool::new(tool.spec.name, tool.spec.description, Arc::new(schema)).annotate(annotations)
}

fn agent_tool(agent: &str) -> Tool {
    let description = format!(
        "Ask the Keel agent `{agent}`: it runs on the input as a recorded run (with its own \
         model, tools and policies) and answers its final answer and the run's request id."
    );
    let mut schema = schema_of::<AgentArgs>();
    super::portable::portable(&mut schema);
    Tool::new(
        format!("{AGENT_PREFIX}{agent}"),
        description,
        Arc::new(schema),
    )
    .annotate(ToolAnnotations::new().read_only(false))
}

fn control_tool(tool: &ControlTool) -> Tool {
    let mut annotations = ToolAnnotations::new().read_only(tool.read_only);
    if !tool.read_only {
        annotations = annotations.destructive(tool.destructive);
    }
    let mut schema = (tool.schema)();
    super::portable::portable(&mut schema);
    Tool::new(tool.name, tool.description, Arc::new(schema)).annotate(annotations)
}

/// `{type: object}`.
fn object_schema() -> JsonObject {
    let mut map = Map::new();
    map.insert("type".into(), Value::from("object"));
    map
}

/// The JSON Schema (2020-12, inlined, untitled, with `properties` even when there are none)
/// of `T`'s arguments.
fn schema_of<T: JsonSchema>() -> JsonObject {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    match schema.to_value() {
        Value::Object(mut map) => {
            // The struct's own name and doc are ours, not the client's business.
            map.remove("title");
            map.remove("description");
            map.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            map
        }
        _ => object_schema(),
    }
}

/// [`RunsListArgs`]' schema, with `status` limited to the run statuses.
fn runs_list_schema() -> JsonObject {
    let mut schema = schema_of::<RunsListArgs>();
    if let Some(Value::Object(status)) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("status"))
    {
        let mut names: Vec<Value> = keel_types::RunStatus::NAMES
            .iter()
            .map(|n| Value::from(*n))
            .collect();
        names.push(Value::Null);
        status.insert("enum".into(), Value::Array(names));
    }
    schema
}

/// `agent__<name>`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentArgs {
    /// What to ask the agent.
    pub input: String,
    /// A session id (1–128 letters, digits, `.`, `_` or `-`): the run is a turn of it.
    #[serde(default)]
    pub session: Option<String>,
}

/// `keel__task_create`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TaskCreateArgs {
    /// The workspace tool to call.
    pub tool: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Run the PreToolUse hooks again when the task runs.
    #[serde(default)]
    pub double_check_on_run: bool,
}

/// The arguments of the tools that name one task.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TaskIdArgs {
    /// The task's id (`task_…`).
    pub task_id: String,
}

/// `keel__task_update`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TaskUpdateArgs {
    /// The task's id (`task_…`).
    pub task_id: String,
    /// A JSON merge patch of the task's arguments.
    pub patch: Map<String, Value>,
}

/// The most runs one `keel__runs_list` answers, and how many when not told.
pub(crate) const MAX_RUNS: u32 = 100;
pub(crate) const DEFAULT_RUNS: u32 = 20;

/// `keel__runs_list`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunsListArgs {
    /// Only runs with this status.
    #[serde(default)]
    pub status: Option<String>,
    /// Only runs of this agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only runs of this session.
    #[serde(default)]
    pub session: Option<String>,
    /// How many (default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// The most events one `keel__run_events` answers, and how many when not told.
pub(crate) const MAX_EVENTS: u32 = 1000;
pub(crate) const DEFAULT_EVENTS: u32 = 200;

/// `keel__run_events`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RunEventsArgs {
    /// The run's request id.
    pub request_id: String,
    /// Only events with a greater seq (default 0: from the first).
    #[serde(default)]
    pub after: Option<u64>,
    /// How many at most (default 200).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}
