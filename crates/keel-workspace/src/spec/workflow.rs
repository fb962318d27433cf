//! `kind: Workflow` — a graph of agent, tool, nested-workflow, approval, map and join nodes
//! whose edges carry typed conditions (`docs/workflows.md`), and the structured output an
//! agent or a node declares (`output: {schema}`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Duration;

/// The structured output of an agent or a node: the answer must be JSON valid against
/// `schema`. An agent's model is asked for it and asked again with the issues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputSpec {
    /// A JSON Schema (draft 2020-12) the value must satisfy.
    #[schemars(with = "BTreeMap<String, Value>")]
    pub schema: Value,
    /// How often an agent's model is asked again after an invalid answer (default 2).
    #[serde(default = "default_output_retries")]
    #[schemars(range(max = 10))]
    pub max_retries: u32,
}

fn default_output_retries() -> u32 {
    2
}

impl OutputSpec {
    /// `schema` with the default retries.
    pub fn new(schema: Value) -> Self {
        Self {
            schema,
            max_retries: default_output_retries(),
        }
    }
}

/// A `Workflow` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowSpec {
    #[serde(default)]
    pub description: String,
    /// The schema of the workflow's input. Without one, or with `type: string`, the request's
    /// input is text; otherwise it is parsed as JSON and checked.
    #[serde(default)]
    pub input: Option<InputSpec>,
    /// The nodes, in the order they are shown.
    pub nodes: Vec<NodeSpec>,
    /// The nodes that run first (default: the first node). Every other node must be
    /// reachable from them along `edges`.
    #[serde(default)]
    pub start: Vec<String>,
    #[serde(default)]
    pub edges: Vec<EdgeSpec>,
    /// What the workflow returns: a template over `input` and `outputs` (e.g.
    /// `"{{ outputs.report }}"`), and the schema of the result. Without `value`: the output of
    /// the one sink node that ran, or an object of every sink node's output by id.
    #[serde(default)]
    pub output: Option<WorkflowOutput>,
    /// Spec-driven phases, in order: a phase's nodes start once the phase before it was
    /// verified by its gate.
    #[serde(default)]
    pub phases: Vec<PhaseSpec>,
}

/// The schema of a workflow's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputSpec {
    #[schemars(with = "BTreeMap<String, Value>")]
    pub schema: Value,
}

/// A workflow's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowOutput {
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub schema: Option<Value>,
}

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    /// Runs an agent (a child run) with the rendered `input` as its prompt.
    Agent,
    /// Calls a tool through the gateway (a child run, governed like any call).
    Tool,
    /// Runs another workflow (a child run).
    Workflow,
    /// Waits for a person's decision, durably, like a tool's approval.
    Approval,
    /// Runs `node` once for each item of `items`, at most `concurrency` at a time.
    Map,
    /// Gathers its upstream nodes' outputs into one object.
    Join,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Tool => "tool",
            Self::Workflow => "workflow",
            Self::Approval => "approval",
            Self::Map => "map",
            Self::Join => "join",
        }
    }
}

/// One node. Which fields apply depends on `kind`; `keel validate` names any that is
/// missing or has no effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique within the workflow (letters, digits, `_`, `-`); not needed for a map's `node`.
    #[serde(default)]
    pub id: String,
    pub kind: NodeKind,
    /// `agent`: the `Agent` document.
    #[serde(default)]
    pub agent: Option<String>,
    /// `tool`: the tool (any tool an agent could list).
    #[serde(default)]
    pub tool: Option<String>,
    /// `workflow`: the nested `Workflow` document.
    #[serde(default)]
    pub workflow: Option<String>,
    /// `agent`: the prompt; `workflow`: the nested input. Strings are templates
    /// (minijinja, strict: an undefined name is an error) over `input`, `outputs`, and in a
    /// map `item` and `index`; a string that is one `{{ expression }}` keeps the expression's
    /// type.
    #[serde(default)]
    pub input: Option<Value>,
    /// `tool`: the arguments, templated like `input`.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// `approval`: what the person is asked (a template).
    #[serde(default)]
    pub message: Option<String>,
    /// `approval`: what a denial does: `fail` the workflow (default) or `continue` with
    /// `{approved: false}` as the node's output.
    #[serde(default)]
    pub on_deny: OnDeny,
    /// `map`: an expression giving the list, e.g. `outputs.plan.files`.
    #[serde(default)]
    pub items: Option<String>,
    /// `map`: items run at once (default 4).
    #[serde(default)]
    #[schemars(range(min = 1, max = 64))]
    pub concurrency: Option<u32>,
    /// `map`: the node run for each item (kind `agent`, `tool` or `workflow`).
    #[serde(default)]
    pub node: Option<Box<NodeSpec>>,
    /// `tool` (and a map's `node`): the schema of the tool's JSON output, which edge
    /// conditions may then read. An agent node's schema is its agent's `output.schema`.
    #[serde(default)]
    pub output: Option<NodeOutput>,
    /// The most one attempt may take (default: the runtime's `runTimeout`).
    #[serde(default)]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub retry: Option<NodeRetry>,
}

/// The schema of a node's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeOutput {
    #[schemars(with = "BTreeMap<String, Value>")]
    pub schema: Value,
}

/// What an approval node's denial does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnDeny {
    #[default]
    Fail,
    Continue,
}

/// A node's retries: attempts in all (the first included) and the wait between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeRetry {
    #[schemars(range(min = 1, max = 20))]
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Option<Duration>,
}

/// An edge: `to` may run once `from` completed and `when` (if any) holds on `from`'s output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeSpec {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub when: Option<Condition>,
    /// Makes this edge a loop back to an earlier node: taken at most this many times, after
    /// which the loop ends. A cycle needs one such edge.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub max_iterations: Option<u32>,
}

/// A condition over typed values: a JSON pointer into the upstream node's output (which must
/// have a schema) compared with a literal; or `all`, `any`, `not` of conditions. Exactly one
/// comparison (or combinator) per condition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// A JSON pointer (RFC 6901) into the output, e.g. `/severity`.
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub equals: Option<Value>,
    #[serde(default)]
    pub not_equals: Option<Value>,
    #[serde(default, rename = "in")]
    pub one_of: Option<Vec<Value>>,
    #[serde(default)]
    pub greater_than: Option<f64>,
    #[serde(default)]
    pub less_than: Option<f64>,
    /// Whether the field is present (and not `null`).
    #[serde(default)]
    pub exists: Option<bool>,
    #[serde(default)]
    pub all: Option<Vec<Condition>>,
    #[serde(default)]
    pub any: Option<Vec<Condition>>,
    #[serde(default)]
    pub not: Option<Box<Condition>>,
}

impl Condition {
    /// The comparisons and combinators set, by their YAML names.
    pub fn operators(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        for (name, on) in [
            ("equals", self.equals.is_some()),
            ("notEquals", self.not_equals.is_some()),
            ("in", self.one_of.is_some()),
            ("greaterThan", self.greater_than.is_some()),
            ("lessThan", self.less_than.is_some()),
            ("exists", self.exists.is_some()),
            ("all", self.all.is_some()),
            ("any", self.any.is_some()),
            ("not", self.not.is_some()),
        ] {
            if on {
                set.push(name);
            }
        }
        set
    }

    /// Whether the condition holds on `output`. A missing field compares unequal (and not
    /// greater or less than anything).
    pub fn holds(&self, output: &Value) -> bool {
        if let Some(all) = &self.all {
            return all.iter().all(|c| c.holds(output));
        }
        if let Some(any) = &self.any {
            return any.iter().any(|c| c.holds(output));
        }
        if let Some(not) = &self.not {
            return !not.holds(output);
        }
        let found = self
            .path
            .as_deref()
            .and_then(|p| output.pointer(p))
            .filter(|v| !v.is_null());
        if let Some(exists) = self.exists {
            return found.is_some() == exists;
        }
        if let Some(expected) = &self.equals {
            return found.is_some_and(|v| same(v, expected));
        }
        if let Some(unexpected) = &self.not_equals {
            return !found.is_some_and(|v| same(v, unexpected));
        }
        if let Some(options) = &self.one_of {
            return found.is_some_and(|v| options.iter().any(|o| same(v, o)));
        }
        let number = found.and_then(Value::as_f64);
        if let Some(bound) = self.greater_than {
            return number.is_some_and(|n| n > bound);
        }
        if let Some(bound) = self.less_than {
            return number.is_some_and(|n| n < bound);
        }
        false
    }
}

/// JSON equality where `1` and `1.0` are the same number.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// A phase of a spec-driven workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhaseSpec {
    /// e.g. `spec`, `plan`, `implement`, `verify`.
    pub name: String,
    /// The ids of the nodes that belong to it (each node to at most one phase).
    pub nodes: Vec<String>,
    /// What must pass before the next phase starts; none: the phase is verified when its
    /// nodes are done.
    #[serde(default)]
    pub gate: Option<GateSpec>,
}

/// A phase's gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateSpec {
    pub kind: GateKind,
    /// `command`: the program and its arguments, run in the workspace; exit 0 passes.
    #[serde(default)]
    pub command: Vec<String>,
    /// `agent`: the agent asked for a verdict; it must declare `output.schema`.
    #[serde(default)]
    pub agent: Option<String>,
    /// `agent`: the prompt (a template over `input` and `outputs`).
    #[serde(default)]
    pub input: Option<String>,
    /// `agent`: the condition on the verdict that passes, e.g. `{path: /pass, equals: true}`.
    #[serde(default)]
    pub pass: Option<Condition>,
    /// `approval`: what the person is asked (a template).
    #[serde(default)]
    pub message: Option<String>,
    /// `command`: the most it may take (default 10 minutes).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// How a gate decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GateKind {
    Command,
    Agent,
    Approval,
}

impl GateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::Agent => "agent",
            Self::Approval => "approval",
        }
    }
}
