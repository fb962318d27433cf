//! The tool gateway: the one path every tool call takes, whoever makes it (SPEC §5).
//!
//! [`Gateway::guard`] runs the checks in order — inventory (the tool must be in the caller's
//! list), argument parsing, JSON Schema validation — and returns a [`Guarded`] call with the
//! decision and the structured [`Issue`]s. Only an accepted call can be passed to
//! [`Gateway::execute`], so a tool implementation never sees arguments that fail its schema.
//! Repair, policy, hooks and approval slot in between guard and execute in later steps.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use keel_types::{
    GuardDecision, Issue, Repair, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use keel_workspace::GatewayMode;
use serde_json::{Value, json};

/// Longest rendering of a found value inside an issue.
const MAX_FOUND_CHARS: usize = 120;

/// Why the gateway could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// A tool's argument schema is not a valid JSON Schema.
    #[error("tool `{tool}` has an invalid argument schema: {message}")]
    InvalidSchema { tool: String, message: String },
    /// Two tools share a name.
    #[error("tool `{0}` is registered twice")]
    Duplicate(String),
}

struct Registered {
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
}

/// The registry of runnable tools with their compiled schemas.
pub struct Gateway {
    tools: HashMap<String, Registered>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.tools.keys().collect();
        names.sort();
        f.debug_struct("Gateway").field("tools", &names).finish()
    }
}

/// The gateway's verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub call_id: String,
    /// The tool name as the model sent it.
    pub requested: String,
    /// The tool that runs: `requested`, or the inventory tool its name was repaired to.
    pub tool: String,
    pub decision: GuardDecision,
    /// Parsed, valid (possibly repaired) arguments; present unless blocked.
    pub arguments: Option<Value>,
    pub issues: Vec<Issue>,
    /// What was changed to make the call valid (decision `repaired`).
    pub repairs: Vec<Repair>,
}

impl Guarded {
    /// Whether the call may run.
    pub fn is_allowed(&self) -> bool {
        self.decision != GuardDecision::Blocked
    }

    /// The tool result the model receives for a blocked call: the issues, so it can correct
    /// itself.
    pub fn blocked_message(&self) -> String {
        blocked_message(&self.requested, &self.issues)
    }
}

/// The tool result a model receives for a blocked call of `tool` (also rebuilt from a run's
/// log when it is resumed).
pub fn blocked_message(tool: &str, issues: &[Issue]) -> String {
    json!({
        "error": "tool call blocked: the arguments do not match the tool's schema",
        "tool": tool,
        "issues": issues,
        "hint": "fix the arguments listed in `issues` and call the tool again",
    })
    .to_string()
}

impl Gateway {
    /// Registers tools and compiles their schemas.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, GatewayError> {
        let mut map = HashMap::new();
        for tool in tools {
            let spec = tool.spec();
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .build(&spec.parameters)
                .map_err(|e| GatewayError::InvalidSchema {
                    tool: spec.name.clone(),
                    message: e.to_string(),
                })?;
            let name = spec.name.clone();
            if map
                .insert(name.clone(), Registered { tool, validator })
                .is_some()
            {
                return Err(GatewayError::Duplicate(name));
            }
        }
        Ok(Self { tools: map })
    }

    /// The specs of the listed tools, in list order, as the model should see them.
    pub fn specs<'a>(&'a self, inventory: &'a [String]) -> impl Iterator<Item = &'a ToolSpec> {
        inventory
            .iter()
            .filter_map(|name| self.tools.get(name).map(|r| r.tool.spec()))
    }

    /// Whether calling the tool twice with the same arguments is safe.
    pub fn is_idempotent(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|r| r.tool.idempotent())
    }

    /// Whether a tool with that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Checks one call against the caller's inventory and the tool's schema, in the gateway
    /// mode `mode_of(tool)` gives for the tool.
    pub async fn guard(
        &self,
        ctx: &ToolContext,
        inventory: &[String],
        call: &ToolCall,
        mode_of: &(dyn Fn(&str) -> GatewayMode + Sync),
    ) -> Guarded {
        let blocked = |issues: Vec<Issue>| Guarded {
            call_id: call.id.clone(),
            requested: call.name.clone(),
            tool: call.name.clone(),
            decision: GuardDecision::Blocked,
            arguments: None,
            issues,
            repairs: Vec::new(),
        };
        let registered = match inventory.iter().any(|n| n == &call.name) {
            true => self.tools.get(&call.name),
            false => None,
        };
        let Some(registered) = registered else {
            return blocked(vec![Issue {
                path: String::new(),
                expected: format!("one of the agent's tools: {}", inventory.join(", ")),
                found: call.name.clone(),
                message: format!("tool `{}` is not available to this agent", call.name),
            }]);
        };
        let arguments = match parse_arguments(&call.arguments) {
            Ok(value) => value,
            Err(issue) => return blocked(vec![issue]),
        };
        if mode_of(&call.name) != GatewayMode::Off {
            let issues: Vec<Issue> = registered
                .validator
                .iter_errors(&arguments)
                .map(|error| issue_from(&error))
                .collect();
            if !issues.is_empty() {
                return blocked(issues);
            }
        }
        let issues = registered.tool.check(ctx, &arguments);
        if !issues.is_empty() {
            return blocked(issues);
        }
        Guarded {
            call_id: call.id.clone(),
            requested: call.name.clone(),
            tool: call.name.clone(),
            decision: GuardDecision::Accepted,
            arguments: Some(arguments),
            issues: Vec::new(),
            repairs: Vec::new(),
        }
    }

    /// Runs a call the guard allowed. A blocked call is refused here too, so nothing can skip
    /// the guard by accident.
    pub async fn execute(
        &self,
        ctx: &ToolContext,
        guarded: &Guarded,
    ) -> Result<ToolOutput, ToolError> {
        let (Some(arguments), true) = (&guarded.arguments, guarded.is_allowed()) else {
            return Err(ToolError::InvalidArguments(guarded.blocked_message()));
        };
        let Some(registered) = self.tools.get(&guarded.tool) else {
            return Err(ToolError::Failed(format!(
                "tool `{}` is not registered",
                guarded.tool
            )));
        };
        registered.tool.call(ctx, arguments.clone()).await
    }
}

/// Parses the raw argument text a model sent. Empty text means no arguments.
fn parse_arguments(raw: &str) -> Result<Value, Issue> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str::<Value>(raw).map_err(|e| Issue {
        path: String::new(),
        expected: "arguments as a JSON object".into(),
        found: truncate(raw),
        message: format!("the arguments are not valid JSON: {e}"),
    })
}

fn issue_from(error: &jsonschema::ValidationError<'_>) -> Issue {
    let found = error.instance();
    let expected = match error.kind() {
        ValidationErrorKind::Type { kind } => match kind {
            TypeKind::Single(t) => t.to_string(),
            TypeKind::Multiple(set) => set
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
        },
        ValidationErrorKind::Required { property } => {
            format!("required property {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("no properties besides the declared ones (unexpected: {unexpected:?})")
        }
        ValidationErrorKind::Enum { options } => format!("one of {options}"),
        ValidationErrorKind::Constant { expected_value } => format!("exactly {expected_value}"),
        ValidationErrorKind::Minimum { limit } => format!("a number >= {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("a number <= {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("a number > {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("a number < {limit}"),
        ValidationErrorKind::MinLength { limit } => format!("at least {limit} characters"),
        ValidationErrorKind::MaxLength { limit } => format!("at most {limit} characters"),
        ValidationErrorKind::MinItems { limit } => format!("at least {limit} items"),
        ValidationErrorKind::MaxItems { limit } => format!("at most {limit} items"),
        ValidationErrorKind::Pattern { pattern } => format!("a string matching /{pattern}/"),
        ValidationErrorKind::Format { format } => format!("a string in `{format}` format"),
        other => format!("a value satisfying `{}`", other.keyword()),
    };
    let found = match error.kind() {
        ValidationErrorKind::Required { .. } => "nothing".into(),
        ValidationErrorKind::Type { .. } => {
            format!("{} {}", json_type(found), truncate_value(found))
        }
        _ => truncate_value(found),
    };
    Issue {
        path: error.instance_path().as_str().to_owned(),
        expected,
        found,
        message: error.to_string(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn truncate_value(value: &Value) -> String {
    truncate(&value.to_string())
}

fn truncate(text: &str) -> String {
    if text.chars().count() <= MAX_FOUND_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_FOUND_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use async_trait::async_trait;

    use super::*;

    struct Echo(ToolSpec);

    #[async_trait]
    impl Tool for Echo {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        async fn call(&self, _: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::json(&args))
        }
    }

    fn gateway() -> Gateway {
        let spec = ToolSpec {
            name: "get_weather".into(),
            description: "weather".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": { "type": "string" },
                    "days": { "type": "integer", "minimum": 1 },
                    "unit": { "enum": ["c", "f"] }
                },
                "required": ["city"],
                "additionalProperties": false
            }),
        };
        Gateway::new([Arc::new(Echo(spec)) as Arc<dyn Tool>]).unwrap()
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn ctx() -> ToolContext {
        ToolContext {
            workspace_root: ".".into(),
            request_id: "run_x".into(),
            session_id: None,
            agent: "a".into(),
            max_output_bytes: 1024,
        }
    }

    fn inventory() -> Vec<String> {
        vec!["get_weather".into()]
    }

    #[test]
    fn valid_call_is_accepted_with_parsed_arguments() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":"Paris"}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision, GuardDecision::Accepted);
        assert_eq!(g.arguments, Some(json!({"city": "Paris"})));
    }

    #[test]
    fn every_schema_violation_is_reported_with_its_path() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"days":0,"unit":"k","x":1}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision, GuardDecision::Blocked);
        assert!(g.arguments.is_none());
        let mut paths: Vec<_> = g.issues.iter().map(|i| i.path.as_str()).collect();
        paths.sort();
        assert_eq!(paths, vec!["", "", "/days", "/unit"]);
        let days = g.issues.iter().find(|i| i.path == "/days").unwrap();
        assert_eq!(days.expected, "a number >= 1");
        assert_eq!(days.found, "0");
    }

    #[test]
    fn wrong_type_names_expected_and_found() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":42}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.issues.len(), 1);
        assert_eq!(g.issues[0].path, "/city");
        assert_eq!(g.issues[0].expected, "string");
        assert_eq!(g.issues[0].found, "integer 42");
    }

    #[test]
    fn tool_outside_inventory_is_blocked_even_if_registered() {
        let g = block_on(gateway().guard(
            &ctx(),
            &[],
            &call("get_weather", r#"{"city":"Paris"}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision, GuardDecision::Blocked);
        assert!(g.issues[0].message.contains("not available"));
    }

    #[test]
    fn malformed_json_is_blocked() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision, GuardDecision::Blocked);
        assert!(g.issues[0].message.contains("not valid JSON"));
    }

    #[tokio::test]
    async fn execute_refuses_a_blocked_call() {
        let gw = gateway();
        let g = gw
            .guard(&ctx(), &inventory(), &call("get_weather", "{}"), &|_| {
                GatewayMode::Repair
            })
            .await;
        let ctx = ToolContext {
            workspace_root: ".".into(),
            request_id: "run_x".into(),
            session_id: None,
            agent: "a".into(),
            max_output_bytes: 1024,
        };
        let err = gw.execute(&ctx, &g).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)));
    }
}
