//! The tool gateway: the one path every tool call takes, whoever makes it
//! (`docs/tool-gateway.md`).
//!
//! [`Gateway::guard`] runs the checks in order and returns a [`Guarded`] call with the
//! decision, the structured [`Issue`]s and the [`Repair`]s it made:
//!
//! 1. inventory — the tool must be in the caller's list; in `repair` mode a misspelled name is
//!    repaired to a listed tool ([`crate::repair::name`]), never to one outside the list;
//! 2. parsing, then JSON Schema validation — in `repair` mode (the default) a call that fails
//!    its schema gets deterministic repairs ([`crate::repair::schema`]), then, if issues
//!    remain and a repair model is configured, one model repair; the result is re-validated
//!    with the compiled schema and what is still wrong blocks the call. `validate` mode blocks
//!    without repairing; `off` skips the schema;
//!    An integer beyond 64 bits blocks the call in every mode (it would be rounded);
//! 3. in `repair` mode, the tool's semantic repairs ([`Tool::repair`]), recorded like the
//!    others and validated against the schema again;
//! 4. the tool's semantic `check` (paths inside the workspace, …).
//!
//! A blocked call's issues and repairs are bounded: a value over 256 characters is quoted
//! by prefix, size and SHA-256 ([`quote`]).
//!
//! Only an allowed call can be passed to [`Gateway::execute`], so a tool implementation never
//! sees arguments that fail its schema (outside `off` mode). Between the two, the runtime
//! applies policy, hooks and approval; a [`Guarded`] verdict only lets them refuse a call or
//! hand it arguments the gateway checked again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use keel_types::{
    GuardDecision, Issue, ModelProvider, Repair, RepairKind, Tool, ToolCall, ToolContext,
    ToolError, ToolOutput, ToolSpec,
};
use keel_workspace::GatewayMode;
use serde_json::Value;
use tracing::{debug, warn};

use crate::repair;

mod catalog;
pub mod headline;
mod issues;
mod verdict;

pub use catalog::{Catalog, SourceEvent, ToolSource};
pub use issues::{quote, schema_issues, schema_problem};
pub use verdict::{Guarded, blocked_message};

use catalog::{Registered, Snapshot, expand, listed};
use issues::{bounded_issue, bounded_repair, issue_from, oversized_issue};

/// How long the repair model may take before the call is blocked instead.
const DEFAULT_REPAIR_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the gateway could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// A tool's argument schema is not a valid JSON Schema.
    #[error("tool `{tool}` has an invalid argument schema: {message}")]
    InvalidSchema { tool: String, message: String },
    /// Two tools share a name.
    #[error("tool `{0}` is registered twice")]
    Duplicate(String),
    /// A source published a tool whose name lacks the source's prefix.
    #[error("tool `{tool}` does not start with its source's prefix `{prefix}`")]
    OutsidePrefix { tool: String, prefix: String },
}

/// The registry of runnable tools with their compiled schemas.
pub struct Gateway {
    catalog: Catalog,
    sources: Vec<Arc<dyn ToolSource>>,
    repair_model: Option<Arc<dyn ModelProvider>>,
    repair_timeout: Duration,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources: Vec<_> = self.sources.iter().map(|s| s.prefix()).collect();
        f.debug_struct("Gateway")
            .field("tools", &self.catalog)
            .field("sources", &sources)
            .field(
                "repair_model",
                &self.repair_model.as_ref().map(|m| m.model_name()),
            )
            .finish()
    }
}

/// A verdict under construction: the call, the tool it resolved to and the repairs so far.
struct Verdict<'a> {
    call: &'a ToolCall,
    tool: String,
    repairs: Vec<Repair>,
}

impl Verdict<'_> {
    /// Blocks the call. What it records is bounded ([`quote`]): a huge bad value costs the
    /// model and the guard event a few hundred bytes.
    fn blocked(self, issues: Vec<Issue>) -> Guarded {
        debug!(call_id = %self.call.id, tool = %self.tool, issues = issues.len(), "Tool call blocked.");
        Guarded::new(
            self.call,
            self.tool,
            GuardDecision::Blocked,
            None,
            issues.into_iter().map(bounded_issue).collect(),
            self.repairs.into_iter().map(bounded_repair).collect(),
        )
    }

    fn allowed(self, arguments: Value) -> Guarded {
        let decision = match self.repairs.is_empty() {
            true => GuardDecision::Accepted,
            false => GuardDecision::Repaired,
        };
        Guarded::new(
            self.call,
            self.tool,
            decision,
            Some(arguments),
            Vec::new(),
            self.repairs,
        )
    }
}

impl Gateway {
    /// Registers tools and compiles their schemas.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, GatewayError> {
        let mut map = HashMap::new();
        for tool in tools {
            let name = tool.spec().name.clone();
            let registered = Registered::compile(tool)?;
            if map.insert(name.clone(), Arc::new(registered)).is_some() {
                return Err(GatewayError::Duplicate(name));
            }
        }
        Ok(Self {
            catalog: Catalog::new(map),
            sources: Vec::new(),
            repair_model: None,
            repair_timeout: DEFAULT_REPAIR_TIMEOUT,
        })
    }

    /// Asks `model` to fix calls that deterministic repairs could not (in `repair` mode). Its
    /// answer is re-validated; a failure or an invalid answer blocks the call as before.
    pub fn with_repair_model(mut self, model: Arc<dyn ModelProvider>) -> Self {
        self.repair_model = Some(model);
        self
    }

    /// How long the repair model may take (default 30 s); past it the call is blocked.
    pub fn with_repair_timeout(mut self, timeout: Duration) -> Self {
        self.repair_timeout = timeout;
        self
    }

    /// Adds a source of tools discovered at run time (an MCP server); it publishes into
    /// [`Self::catalog`].
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// The registry, for sources to publish their tools into.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The sources of tools discovered at run time.
    pub fn sources(&self) -> &[Arc<dyn ToolSource>] {
        &self.sources
    }

    /// Waits until every source an inventory draws on has settled (published its tools or
    /// failed): call it before showing a model its tools. Quick once the sources settled.
    /// Returns what happened to those sources since they last reported.
    pub async fn settle(&self, inventory: &[String]) -> Vec<SourceEvent> {
        let used: Vec<&Arc<dyn ToolSource>> = self
            .sources
            .iter()
            .filter(|source| {
                let prefix = source.prefix();
                inventory.iter().any(|entry| entry.starts_with(prefix))
            })
            .collect();
        if used.is_empty() {
            return Vec::new();
        }
        futures_util::future::join_all(used.iter().map(|source| source.settle())).await;
        used.iter()
            .flat_map(|source| source.take_lifecycle())
            .collect()
    }

    /// The inventory's tool names with its globs (`mcp__files__*`) resolved against the tools
    /// registered now.
    pub fn inventory(&self, inventory: &[String]) -> Vec<String> {
        expand(inventory, &self.catalog.snapshot())
    }

    /// The specs of the listed tools, in list order (a glob's matches sorted by name), as
    /// the model should see them. The list is shared: asked again for the same inventory while
    /// the tools are unchanged, it is the same list.
    pub fn specs(&self, inventory: &[String]) -> Arc<[ToolSpec]> {
        let snapshot = self.catalog.snapshot();
        self.catalog.spec_list(&snapshot, inventory, || {
            expand(inventory, &snapshot)
                .iter()
                .filter_map(|name| snapshot.get(name).map(|r| r.tool.spec().clone()))
                .collect()
        })
    }

    /// Whether the tool only reads (policies allow such tools by default).
    pub fn is_read_only(&self, name: &str) -> bool {
        self.registered(name).is_some_and(|r| r.tool.read_only())
    }

    /// Whether the tool reports progress while it runs ([`Tool::reports_progress`]).
    pub fn reports_progress(&self, name: &str) -> bool {
        self.registered(name)
            .is_some_and(|r| r.tool.reports_progress())
    }

    /// Whether calling the tool twice with the same arguments is safe.
    pub fn is_idempotent(&self, name: &str) -> bool {
        self.registered(name).is_some_and(|r| r.tool.idempotent())
    }

    /// Whether a tool with that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.registered(name).is_some()
    }

    /// The registered tool of that name.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.registered(name).map(|r| r.tool.clone())
    }

    fn registered(&self, name: &str) -> Option<Arc<Registered>> {
        self.catalog.snapshot().get(name).cloned()
    }

    /// Why a tool of a source is not registered, when its source is down.
    fn unavailable(&self, name: &str) -> Option<String> {
        self.sources
            .iter()
            .find(|source| name.starts_with(source.prefix()))
            .and_then(|source| source.unavailable())
    }

    /// Checks one call against the caller's inventory and the tool's schema, in the gateway
    /// mode `mode_of(tool)` gives for the tool, repairing what the mode allows.
    pub async fn guard(
        &self,
        ctx: &ToolContext,
        inventory: &[String],
        call: &ToolCall,
        mode_of: &(dyn Fn(&str) -> GatewayMode + Sync),
    ) -> Guarded {
        let mut verdict = Verdict {
            call,
            tool: call.name.clone(),
            repairs: Vec::new(),
        };
        let snapshot = self.catalog.snapshot();
        let Some((name, registered)) = self.resolve_tool(&snapshot, inventory, &call.name, mode_of)
        else {
            let message = match self.unavailable(&call.name) {
                Some(why) if listed(inventory, &call.name) => {
                    headline::unavailable_message(&call.name, &why)
                }
                _ => format!("tool `{}` is not available to this agent", call.name),
            };
            return verdict.blocked(vec![Issue {
                path: String::new(),
                expected: format!(
                    "{}: {}",
                    headline::EXPECTED_TOOL,
                    expand(inventory, &snapshot).join(", ")
                ),
                found: call.name.clone(),
                message,
            }]);
        };
        let (name, registered) = (name.as_str(), registered.as_ref());
        if name != call.name {
            verdict.repairs.push(Repair {
                path: String::new(),
                kind: RepairKind::ToolName,
                from: Value::String(call.name.clone()),
                to: Value::String(name.to_owned()),
            });
            verdict.tool = name.to_owned();
        }
        let mode = mode_of(name);
        let arguments = match self
            .parsed(
                name,
                registered,
                &call.arguments,
                mode,
                &mut verdict.repairs,
            )
            .await
        {
            Ok(value) => value,
            Err(issues) => return verdict.blocked(issues),
        };
        let arguments = match mode {
            GatewayMode::Off => arguments,
            _ if registered.validator.is_valid(&arguments) => arguments,
            GatewayMode::Validate => return verdict.blocked(issues_of(registered, &arguments)),
            GatewayMode::Repair => {
                match self
                    .repaired(name, registered, arguments, &mut verdict.repairs)
                    .await
                {
                    Ok(arguments) => arguments,
                    Err(issues) => return verdict.blocked(issues),
                }
            }
        };
        let arguments = match mode {
            GatewayMode::Repair => {
                match Self::tool_repaired(ctx, registered, arguments, &mut verdict.repairs) {
                    Ok(arguments) => arguments,
                    Err(issues) => return verdict.blocked(issues),
                }
            }
            _ => arguments,
        };
        let issues = registered.tool.check(ctx, &arguments);
        if !issues.is_empty() {
            return verdict.blocked(issues);
        }
        verdict.allowed(arguments)
    }

    /// The tool a call names: the sent name when the caller lists it, or — in `repair` mode,
    /// for a name that is no registered tool — the listed tool it is a near miss of.
    fn resolve_tool(
        &self,
        snapshot: &Snapshot,
        inventory: &[String],
        sent: &str,
        mode_of: &(dyn Fn(&str) -> GatewayMode + Sync),
    ) -> Option<(String, Arc<Registered>)> {
        if listed(inventory, sent) {
            return snapshot.get(sent).map(|r| (sent.to_owned(), r.clone()));
        }
        // A registered tool the caller does not list was asked for on purpose: never redirect
        // it to a different tool.
        if snapshot.contains_key(sent) {
            return None;
        }
        let expanded = expand(inventory, snapshot);
        let candidates = expanded
            .iter()
            .map(String::as_str)
            .filter(|n| snapshot.contains_key(*n));
        let name = repair::repair_tool_name(sent, candidates)?;
        if mode_of(name) != GatewayMode::Repair {
            return None;
        }
        debug!(sent, tool = name, "Tool name repaired.");
        snapshot.get(name).map(|r| (name.to_owned(), r.clone()))
    }

    /// The arguments parsed from the raw text; text that is not JSON goes to the repair model
    /// in `repair` mode.
    async fn parsed(
        &self,
        name: &str,
        registered: &Registered,
        raw: &str,
        mode: GatewayMode,
        repairs: &mut Vec<Repair>,
    ) -> Result<Value, Vec<Issue>> {
        let issue = match parse_arguments(raw) {
            Ok(value) => return lossless(raw, value),
            Err(issue) if mode == GatewayMode::Repair => issue,
            Err(issue) => return Err(vec![issue]),
        };
        let raw = Value::String(raw.to_owned());
        let issues = std::slice::from_ref(&issue);
        match self.ask_repair_model(name, registered, &raw, issues).await {
            Some(fixed) => {
                repairs.push(model_repair(raw, &fixed));
                Ok(fixed)
            }
            None => Err(vec![issue]),
        }
    }

    /// The tool's own semantic repairs ([`Tool::repair`]), recorded with the others; the
    /// result must still pass the schema.
    fn tool_repaired(
        ctx: &ToolContext,
        registered: &Registered,
        mut arguments: Value,
        repairs: &mut Vec<Repair>,
    ) -> Result<Value, Vec<Issue>> {
        let made = registered.tool.repair(ctx, &mut arguments);
        if made.is_empty() {
            return Ok(arguments);
        }
        debug!(repairs = made.len(), "Tool check repaired the arguments.");
        repairs.extend(made);
        match registered.validator.is_valid(&arguments) {
            true => Ok(arguments),
            false => Err(issues_of(registered, &arguments)),
        }
    }

    /// Repairs invalid arguments: decoding, deterministic repairs, then the repair model.
    /// Returns valid arguments, or the issues that remain.
    async fn repaired(
        &self,
        name: &str,
        registered: &Registered,
        mut arguments: Value,
        repairs: &mut Vec<Repair>,
    ) -> Result<Value, Vec<Issue>> {
        if let Some((decoded, repair)) = repair::decode_arguments(&arguments) {
            repairs.push(repair);
            arguments = decoded;
        }
        let schema = &registered.tool.spec().parameters;
        repairs.extend(repair::repair_arguments(schema, &mut arguments));
        if registered.validator.is_valid(&arguments) {
            return Ok(arguments);
        }
        let issues = issues_of(registered, &arguments);
        match self
            .ask_repair_model(name, registered, &arguments, &issues)
            .await
        {
            Some(fixed) => {
                repairs.push(model_repair(arguments, &fixed));
                Ok(fixed)
            }
            None => Err(issues),
        }
    }

    /// Asks the repair model (if any) once; returns its answer only if it is valid.
    async fn ask_repair_model(
        &self,
        name: &str,
        registered: &Registered,
        arguments: &Value,
        issues: &[Issue],
    ) -> Option<Value> {
        let model = self.repair_model.as_deref()?;
        let schema = &registered.tool.spec().parameters;
        let request = repair::model::request(name, schema, arguments, issues);
        let answer = tokio::time::timeout(
            self.repair_timeout,
            repair::model::answer_text(model, request),
        )
        .await;
        let text = match answer {
            Ok(Ok(text)) => text,
            Ok(Err(error)) => {
                warn!(tool = name, %error, "Repair model failed; blocking the call.");
                return None;
            }
            Err(_) => {
                warn!(tool = name, timeout = ?self.repair_timeout, "Repair model timed out; blocking the call.");
                return None;
            }
        };
        let Some(mut fixed) = repair::model::parse_answer(&text) else {
            debug!(tool = name, "Repair model answered no JSON object.");
            return None;
        };
        // Small models still send `"3"` for 3: the same deterministic clean-up applies, folded
        // into the one `repair_model` repair.
        repair::repair_arguments(schema, &mut fixed);
        let valid = registered.validator.is_valid(&fixed);
        debug!(tool = name, valid, "Repair model answered.");
        valid.then_some(fixed)
    }

    /// Runs a call the guard allowed. A blocked call is refused here too, so nothing can skip
    /// the guard by accident.
    pub async fn execute(
        &self,
        ctx: &ToolContext,
        guarded: &Guarded,
    ) -> Result<ToolOutput, ToolError> {
        let (Some(arguments), true) = (guarded.arguments(), guarded.is_allowed()) else {
            return Err(ToolError::InvalidArguments(guarded.blocked_message()));
        };
        let Some(registered) = self.registered(guarded.tool()) else {
            return Err(ToolError::Failed(format!(
                "tool `{}` is not registered",
                guarded.tool()
            )));
        };
        registered.tool.call(ctx, arguments.clone()).await
    }
}

fn model_repair(from: Value, to: &Value) -> Repair {
    Repair {
        path: String::new(),
        kind: RepairKind::RepairModel,
        from,
        to: to.clone(),
    }
}

fn issues_of(registered: &Registered, arguments: &Value) -> Vec<Issue> {
    registered
        .validator
        .iter_errors(arguments)
        .map(|error| issue_from(&error))
        .collect()
}

/// `value` parsed from `raw`, unless `raw` holds an integer beyond 64 bits that parsing
/// rounded: then one issue per such integer.
fn lossless(raw: &str, value: Value) -> Result<Value, Vec<Issue>> {
    let oversized = repair::numbers::oversized_integers(raw, &value);
    match oversized.is_empty() {
        true => Ok(value),
        false => Err(oversized.iter().map(oversized_issue).collect()),
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
        found: quote(raw).into_owned(),
        message: format!("the arguments are not valid JSON: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use serde_json::json;

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
            seen_files: None,
            progress: None,
            metadata: Default::default(),
            call_id: None,
            call_seq: None,
            traceparent: None,
            files: None,
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
        assert_eq!(g.decision(), GuardDecision::Accepted);
        assert_eq!(g.arguments(), Some(&json!({"city": "Paris"})));
    }

    #[test]
    fn every_schema_violation_is_reported_with_its_path() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"days":0,"unit":"k","x":1}"#),
            &|_| GatewayMode::Validate,
        ));
        assert_eq!(g.decision(), GuardDecision::Blocked);
        assert!(g.arguments().is_none());
        let mut paths: Vec<_> = g.issues().iter().map(|i| i.path.as_str()).collect();
        paths.sort();
        assert_eq!(paths, vec!["", "", "/days", "/unit"]);
        let days = g.issues().iter().find(|i| i.path == "/days").unwrap();
        assert_eq!(days.expected, "a number >= 1");
        assert_eq!(days.found, "0");
    }

    #[test]
    fn wrong_type_names_expected_and_found() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":42}"#),
            &|_| GatewayMode::Validate,
        ));
        assert_eq!(g.issues().len(), 1);
        assert_eq!(g.issues()[0].path, "/city");
        assert_eq!(g.issues()[0].expected, "string");
        assert_eq!(g.issues()[0].found, "integer 42");
    }

    #[test]
    fn tool_outside_inventory_is_blocked_even_if_registered() {
        let g = block_on(gateway().guard(
            &ctx(),
            &[],
            &call("get_weather", r#"{"city":"Paris"}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision(), GuardDecision::Blocked);
        assert!(g.issues()[0].message.contains("not available"));
    }

    #[test]
    fn malformed_json_is_blocked() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision(), GuardDecision::Blocked);
        assert!(g.issues()[0].message.contains("not valid JSON"));
    }

    #[test]
    fn repair_mode_reports_only_the_issues_repairs_left() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("get_weather", r#"{"city":42,"days":"0","unit":"k","x":1}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision(), GuardDecision::Blocked);
        let paths: Vec<_> = g.issues().iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, vec!["/days", "/unit"]);
        let kinds: Vec<_> = g.repairs().iter().map(|r| r.kind.as_str()).collect();
        assert_eq!(
            kinds,
            vec!["coerce_string", "coerce_number", "drop_unknown"]
        );
        assert_eq!(g.repair_note(), None);
    }

    #[test]
    fn repaired_call_carries_its_arguments_and_a_note() {
        let g = block_on(gateway().guard(
            &ctx(),
            &inventory(),
            &call("Get_Weather", r#"{"city":"Paris","days":"3","unit":"F"}"#),
            &|_| GatewayMode::Repair,
        ));
        assert_eq!(g.decision(), GuardDecision::Repaired);
        assert_eq!((g.requested(), g.tool()), ("Get_Weather", "get_weather"));
        assert_eq!(
            g.arguments(),
            Some(&json!({"city": "Paris", "days": 3, "unit": "f"}))
        );
        assert_eq!(
            g.repair_note().unwrap(),
            "the gateway repaired this call: tool name \"Get_Weather\" → \"get_weather\"; \
             /days \"3\" → 3 (coerce_number); /unit \"F\" → \"f\" (enum_case)"
        );
    }

    #[test]
    fn misspelled_name_is_blocked_outside_repair_mode() {
        for mode in [GatewayMode::Validate, GatewayMode::Off] {
            let g = block_on(gateway().guard(
                &ctx(),
                &inventory(),
                &call("get_wether", r#"{"city":"Paris"}"#),
                &|_| mode,
            ));
            assert_eq!(g.decision(), GuardDecision::Blocked, "{mode:?}");
            assert_eq!(g.tool(), "get_wether");
        }
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
            seen_files: None,
            progress: None,
            metadata: Default::default(),
            call_id: None,
            call_seq: None,
            traceparent: None,
            files: None,
        };
        let err = gw.execute(&ctx, &g).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)));
    }
}
