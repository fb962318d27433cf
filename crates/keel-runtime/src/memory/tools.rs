//! The agent tools of memory, governed like any tool: `memory_search {query, namespace?}`
//! over the namespaces the agent reads, and `remember {text, kind, tags}`, which submits a
//! candidate that the memory's write policy decides (the run never waits for a person).

use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{
    Issue, MemoryKind, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, WriteDecision,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Access, Draft, MemoryService, Origin};

pub(crate) const SEARCH: &str = keel_workspace::memory::MEMORY_SEARCH_TOOL;
pub(crate) const REMEMBER: &str = keel_workspace::memory::REMEMBER_TOOL;

fn runtime_error(error: crate::RuntimeError) -> ToolError {
    match error {
        crate::RuntimeError::Memory(message) => ToolError::InvalidArguments(message),
        other => ToolError::Failed(other.to_string()),
    }
}

/// The namespaces of the calling run (`write`: those it may write).
fn accesses(
    memory: &MemoryService,
    ctx: &ToolContext,
    write: bool,
) -> Result<Vec<Access>, ToolError> {
    memory
        .namespaces(&ctx.agent, ctx.session_id.as_ref(), &ctx.metadata, write)
        .map_err(runtime_error)
}

/// The most records one `memory_search` answers.
const MAX_SEARCH_LIMIT: usize = 50;

/// `memory_search`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchInput {
    /// What to look for.
    #[schemars(length(min = 1))]
    query: String,
    /// One of your memory namespaces (default: all of them).
    #[serde(default)]
    namespace: Option<String>,
    /// The most records to return (default 5).
    #[serde(default = "default_search_limit")]
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    limit: usize,
}

fn default_search_limit() -> usize {
    5
}

/// `remember`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberInput {
    /// What to remember, self-contained.
    #[schemars(length(min = 1))]
    text: String,
    /// What it is (default fact).
    #[serde(default)]
    #[schemars(schema_with = "kind_schema")]
    kind: MemoryKind,
    /// A few one-word tags.
    #[serde(default)]
    tags: Vec<String>,
    /// One of your writable namespaces (default: the first).
    #[serde(default)]
    namespace: Option<String>,
}

/// A memory kind: one of its wire names.
fn kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": MemoryKind::NAMES})
}

/// `memory_search`.
#[derive(Debug)]
pub struct MemorySearchTool {
    spec: ToolSpec,
    memory: Arc<MemoryService>,
}

impl MemorySearchTool {
    pub fn new(memory: Arc<MemoryService>) -> Self {
        Self {
            spec: ToolSpec {
                name: SEARCH.to_owned(),
                description: "Search your long-term memory for records about a topic (full-text; \
                              best first). Give `namespace` to search only one of yours."
                    .to_owned(),
                parameters: keel_tools::input::schema_of::<SearchInput>(),
            },
            memory,
        }
    }
}

#[async_trait]
impl Tool for MemorySearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let Some(wanted) = args.get("namespace").and_then(Value::as_str) else {
            return Vec::new();
        };
        match accesses(&self.memory, ctx, false) {
            Ok(list) if list.iter().any(|a| a.namespace == wanted) => Vec::new(),
            Ok(list) => vec![issue(
                wanted,
                format!("unknown namespace `{wanted}`; yours are {}", names(&list)),
            )],
            Err(error) => vec![issue(wanted, error.to_string())],
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: SearchInput = keel_tools::input::parse(args)?;
        let limit = input.limit.clamp(1, MAX_SEARCH_LIMIT);
        let mut list = accesses(&self.memory, ctx, false)?;
        if let Some(wanted) = &input.namespace {
            list.retain(|a| &a.namespace == wanted);
        }
        let hits = self
            .memory
            .rank_all(&list, &input.query, limit)
            .await
            .map_err(runtime_error)?;
        let records: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({
                    "id": h.record.id,
                    "namespace": h.record.namespace,
                    "kind": h.record.kind.as_str(),
                    "text": h.record.text,
                    "tags": h.record.tags,
                    "score": (h.score * 1000.0).round() / 1000.0,
                })
            })
            .collect();
        Ok(ToolOutput::json(&json!({ "records": records })))
    }
}

fn issue(found: &str, message: String) -> Issue {
    Issue {
        path: "/namespace".to_owned(),
        expected: "one of the agent's memory namespaces".to_owned(),
        found: found.to_owned(),
        message,
    }
}

fn names(list: &[Access]) -> String {
    match list.is_empty() {
        true => "none".to_owned(),
        false => list
            .iter()
            .map(|a| format!("`{}`", a.namespace))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `remember`.
#[derive(Debug)]
pub struct RememberTool {
    spec: ToolSpec,
    memory: Arc<MemoryService>,
}

impl RememberTool {
    pub fn new(memory: Arc<MemoryService>) -> Self {
        Self {
            spec: ToolSpec {
                name: REMEMBER.to_owned(),
                description: "Keep something worth knowing in later conversations: a fact, a \
                              preference, a standing instruction or an episode, in one short \
                              self-contained sentence. Depending on policy it is kept at once, \
                              after a person approves it, or not at all; you are told which."
                    .to_owned(),
                parameters: keel_tools::input::schema_of::<RememberInput>(),
            },
            memory,
        }
    }

    /// The namespace a call writes: the one it names, or the agent's first writable one.
    fn target(&self, ctx: &ToolContext, namespace: Option<&str>) -> Result<Access, ToolError> {
        let list = accesses(&self.memory, ctx, true)?;
        match namespace {
            Some(wanted) => list
                .into_iter()
                .find(|a| a.namespace == wanted)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!("unknown namespace `{wanted}`"))
                }),
            None => list.into_iter().next().ok_or_else(|| {
                ToolError::Failed(format!("agent `{}` may write no memory", ctx.agent))
            }),
        }
    }
}

#[async_trait]
impl Tool for RememberTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        // It only submits a candidate; the write policy governs what is kept.
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        match self.target(ctx, args.get("namespace").and_then(Value::as_str)) {
            Ok(_) => Vec::new(),
            Err(error) => {
                let found = args.get("namespace").and_then(Value::as_str).unwrap_or("");
                vec![issue(found, error.to_string())]
            }
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: RememberInput = keel_tools::input::parse(args)?;
        let access = self.target(ctx, input.namespace.as_deref())?;
        let draft = Draft {
            kind: input.kind,
            text: input.text,
            tags: input.tags,
        };
        let origin = Origin {
            request_id: ctx.request_id.clone(),
            session_id: ctx.session_id.clone(),
            agent: ctx.agent.clone(),
            call_id: ctx.call_id.clone(),
            seq: ctx.call_seq,
        };
        let submitted = self
            .memory
            .submit(&access, draft, origin)
            .await
            .map_err(runtime_error)?;
        let mut output = ToolOutput::json(&json!({
            "decision": submitted.decision.as_str(),
            "message": submitted.message,
        }));
        if submitted.decision == WriteDecision::Reject {
            output.content = submitted.message;
        }
        output.events = submitted.events;
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model-facing contract of the memory tools, reviewed when it changes.
    #[test]
    fn memory_tool_input_schemas() {
        insta::assert_json_snapshot!(
            "memory_search_input",
            keel_tools::input::schema_of::<SearchInput>()
        );
        insta::assert_json_snapshot!(
            "remember_input",
            keel_tools::input::schema_of::<RememberInput>()
        );
    }
}
