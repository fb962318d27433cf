//! Checks of `Workflow` documents and of what agents declare for them (`output.schema`,
//! `subagents`): node ids, the fields each node kind needs, references to agents, tools and
//! workflows, templates that parse, a graph whose nodes are all reachable and whose cycles
//! are bounded, and edge conditions that read only fields the upstream node's output schema
//! declares.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Checker, missing_hint, strings};
use crate::documents::Kind;
use crate::mcp::MCP_TOOL_PREFIX;
use crate::template;
use crate::workflow::{WorkflowGraph, approval_output_schema, schema_at};
use crate::yaml::{Node, NodeValue};
use crate::{BUILTIN_TOOLS, TASK_TOOL};

/// Fields that mean something for each node kind (besides `id`, `kind`, `timeout`, `retry`).
fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "agent" => &["agent", "input"],
        "tool" => &["tool", "arguments", "output"],
        "workflow" => &["workflow", "input"],
        "approval" => &["message", "onDeny"],
        "map" => &["items", "concurrency", "node"],
        _ => &[],
    }
}

const KIND_FIELDS: &[&str] = &[
    "agent",
    "tool",
    "workflow",
    "input",
    "arguments",
    "output",
    "message",
    "onDeny",
    "items",
    "concurrency",
    "node",
];

fn seq(node: Option<&Node>) -> &[Node] {
    match node.map(|n| &n.value) {
        Some(NodeValue::Seq(items)) => items,
        _ => &[],
    }
}

impl Checker<'_> {
    /// An agent's `output.schema` and `subagents`, and `task` in its tools.
    pub(super) fn agent_delegation(&mut self, agent: &str) {
        if let Some(schema) = self.spec.get("output").and_then(|o| o.get("schema")) {
            self.json_schema(schema, &format!("`output.schema` of agent `{agent}`"));
        }
        let subagents = strings(self.spec.get("subagents"));
        for (name, node) in &subagents {
            if !self.docs.has_agent(name) {
                let hint = missing_hint(name, self.docs.agent_names(), "Agent", "agents");
                let loc = node.loc.clone();
                self.push(
                    &loc,
                    format!("agent `{agent}` lists subagent `{name}`, which is not defined"),
                    Some(hint),
                );
            }
        }
        if subagents.is_empty()
            && let Some((_, node)) = strings(self.spec.get("tools"))
                .into_iter()
                .find(|(t, _)| *t == TASK_TOOL)
        {
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("agent `{agent}` lists `{TASK_TOOL}` but no `subagents`"),
                Some(
                    "list the agents it may delegate to in `subagents` (it then has `task` anyway)"
                        .into(),
                ),
            );
        }
    }

    /// A value that must be a usable JSON Schema.
    fn json_schema(&mut self, node: &Node, what: &str) {
        let schema = node.to_json();
        if let Err(e) = jsonschema::validator_for(&schema) {
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("{what} is not a usable JSON Schema: {e}"),
                None,
            );
        }
    }

    pub(super) fn workflow(&mut self) {
        let name = self.doc.name.clone();
        let spec: &Node = self.spec;
        let nodes = seq(spec.get("nodes"));
        let mut ids: Vec<(&str, &Node)> = Vec::new();
        for node in nodes {
            match node.get("id").and_then(|n| Some((n.as_str()?, n))) {
                Some((id, id_node)) => {
                    if ids.iter().any(|(seen, _)| *seen == id) {
                        self.push(
                            &id_node.loc,
                            format!("workflow `{name}` has two nodes with id `{id}`"),
                            Some("give each node its own id".into()),
                        );
                    } else if !id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        || id.is_empty()
                    {
                        self.push(
                            &id_node.loc,
                            format!("node id `{id}` may use only letters, digits, `_` and `-`"),
                            None,
                        );
                    }
                    ids.push((id, id_node));
                }
                None => self.push(
                    &node.loc,
                    format!("a node of workflow `{name}` has no `id`"),
                    Some("add `id: <name>`; edges name nodes by id".into()),
                ),
            }
            self.node(node, true);
        }
        // A missing `nodes` is the schema's to report.
        if nodes.is_empty() && spec.get("nodes").is_some() {
            let loc = spec.loc.clone();
            self.push(&loc, format!("workflow `{name}` has no nodes"), None);
        }
        if nodes.is_empty() {
            return;
        }
        let known = |id: &str| ids.iter().any(|(i, _)| *i == id);
        let id_names = || ids.iter().map(|(i, _)| *i);
        for (start, node) in strings(spec.get("start")) {
            if !known(start) {
                let hint = missing_hint(start, id_names(), "node", "nodes");
                self.push(
                    &node.loc,
                    format!("`start` names node `{start}`, which workflow `{name}` does not have"),
                    Some(hint),
                );
            }
        }
        let edges = seq(spec.get("edges"));
        for edge in edges {
            for end in ["from", "to"] {
                if let Some((id, node)) = edge.get(end).and_then(|n| Some((n.as_str()?, n)))
                    && !known(id)
                {
                    let hint = missing_hint(id, id_names(), "node", "nodes");
                    self.push(
                        &node.loc,
                        format!(
                            "edge `{end}` names node `{id}`, which workflow `{name}` does not have"
                        ),
                        Some(hint),
                    );
                }
            }
        }
        let graph = WorkflowGraph::new(
            id_names(),
            strings(spec.get("start")).into_iter().map(|(s, _)| s),
            edges.iter().filter_map(|e| {
                Some((
                    e.get("from")?.as_str()?,
                    e.get("to")?.as_str()?,
                    e.get("maxIterations").is_some(),
                ))
            }),
        );
        self.graph_shape(&name, &graph, &ids, edges);
        for edge in edges {
            let (Some(from), Some(when)) =
                (edge.get("from").and_then(Node::as_str), edge.get("when"))
            else {
                continue;
            };
            let Some(upstream) = nodes
                .iter()
                .find(|n| n.get("id").and_then(Node::as_str) == Some(from))
            else {
                continue;
            };
            let schema = self.output_schema(upstream, 0);
            self.condition(when, from, schema.as_ref());
        }
        self.phases(&name, nodes);
        if let Some(value) = spec.get("output").and_then(|o| o.get("value")) {
            self.templates(value);
        }
        if let Some(schema) = spec.get("output").and_then(|o| o.get("schema")) {
            self.json_schema(schema, &format!("`output.schema` of workflow `{name}`"));
        }
        if let Some(schema) = spec.get("input").and_then(|o| o.get("schema")) {
            self.json_schema(schema, &format!("`input.schema` of workflow `{name}`"));
        }
        self.nesting_cycle(&name);
    }

    /// Unreachable nodes, unbounded cycles and loop edges that close none.
    fn graph_shape(
        &mut self,
        name: &str,
        graph: &WorkflowGraph,
        ids: &[(&str, &Node)],
        edges: &[Node],
    ) {
        let start = graph
            .starts
            .iter()
            .map(|s| format!("`{}`", graph.ids[*s]))
            .collect::<Vec<_>>()
            .join(", ");
        for node in graph.unreachable() {
            let (id, loc) = (ids[node].0, ids[node].1.loc.clone());
            self.push(
                &loc,
                format!("node `{id}` of workflow `{name}` is unreachable: no edge leads to it from the start ({start})"),
                Some(format!("add an edge `{{from: <node>, to: {id}}}`, list it in `start`, or remove it")),
            );
        }
        let edge_node = |from: &str, to: &str| {
            edges.iter().find(|e| {
                e.get("from").and_then(Node::as_str) == Some(from)
                    && e.get("to").and_then(Node::as_str) == Some(to)
            })
        };
        if let Some(cycle) = graph.unbounded_cycle() {
            let path = cycle
                .iter()
                .map(|n| graph.ids[*n].as_str())
                .collect::<Vec<_>>();
            let (last, back) = (path[path.len() - 2], path[path.len() - 1]);
            if let Some(edge) = edge_node(last, back) {
                let loc = edge.loc.clone();
                self.push(
                    &loc,
                    format!(
                        "workflow `{name}` has a cycle without a loop bound: {}",
                        path.join(" → ")
                    ),
                    Some(format!(
                        "give the edge that goes back (`{last}` → `{back}`) `maxIterations: <n>`"
                    )),
                );
            }
        }
        for &(from, to, looped) in &graph.edges {
            if looped && !graph.reaches(to, from) {
                let (from, to) = (&graph.ids[from], &graph.ids[to]);
                if let Some(edge) = edge_node(from, to).and_then(|e| e.get("maxIterations")) {
                    let loc = edge.loc.clone();
                    self.push(&loc, format!("edge `{from}` → `{to}` has `maxIterations` but closes no loop (`{to}` does not lead back to `{from}`)"), Some("remove `maxIterations`".into()));
                }
            }
        }
    }

    /// One node's fields, references and templates; `top` is false for a map's `node`.
    fn node(&mut self, node: &Node, top: bool) {
        let Some(kind) = node.get("kind").and_then(Node::as_str) else {
            return;
        };
        let id = node
            .get("id")
            .and_then(Node::as_str)
            .unwrap_or("?")
            .to_owned();
        let wanted = fields_of(kind);
        for field in KIND_FIELDS {
            if let Some(entry) = node.entry(field)
                && !wanted.contains(field)
            {
                let loc = entry.key_loc.clone();
                self.push(
                    &loc,
                    format!("`{field}` has no effect on a `{kind}` node (`{id}`)"),
                    Some(format!(
                        "a `{kind}` node uses: {}",
                        if wanted.is_empty() {
                            "no other field".to_owned()
                        } else {
                            wanted.join(", ")
                        }
                    )),
                );
            }
        }
        let required = match kind {
            "agent" => Some("agent"),
            "tool" => Some("tool"),
            "workflow" => Some("workflow"),
            "approval" => Some("message"),
            "map" => Some("items"),
            _ => None,
        };
        if let Some(field) = required
            && node.get(field).is_none()
        {
            let loc = node.loc.clone();
            self.push(&loc, format!("`{kind}` node `{id}` needs `{field}`"), None);
        }
        if let Some((agent, n)) = node.get("agent").and_then(|n| Some((n.as_str()?, n)))
            && !self.docs.has_agent(agent)
        {
            let hint = missing_hint(agent, self.docs.agent_names(), "Agent", "agents");
            self.push(
                &n.loc,
                format!("node `{id}` runs agent `{agent}`, which is not defined"),
                Some(hint),
            );
        }
        if let Some((workflow, n)) = node.get("workflow").and_then(|n| Some((n.as_str()?, n)))
            && !self.docs.contains(Kind::Workflow, workflow)
        {
            let hint = missing_hint(
                workflow,
                self.docs.names(Kind::Workflow),
                "Workflow",
                "workflows",
            );
            self.push(
                &n.loc,
                format!("node `{id}` runs workflow `{workflow}`, which is not defined"),
                Some(hint),
            );
        }
        if let Some((tool, n)) = node.get("tool").and_then(|n| Some((n.as_str()?, n))) {
            let known = BUILTIN_TOOLS.contains(&tool)
                || self.docs.contains(Kind::Tool, tool)
                || self.provided.contains(tool)
                || tool.starts_with(MCP_TOOL_PREFIX);
            if !known {
                let names: Vec<&str> = BUILTIN_TOOLS
                    .iter()
                    .copied()
                    .chain(self.docs.names(Kind::Tool))
                    .collect();
                let hint = missing_hint(tool, names.into_iter(), "Tool", "tools");
                self.push(
                    &n.loc,
                    format!("node `{id}` calls tool `{tool}`, which is not defined"),
                    Some(hint),
                );
            }
        }
        if let Some(schema) = node.get("output").and_then(|o| o.get("schema")) {
            self.json_schema(schema, &format!("`output.schema` of node `{id}`"));
        }
        for field in ["input", "arguments", "message"] {
            if let Some(value) = node.get(field) {
                self.templates(value);
            }
        }
        if let Some((items, n)) = node.get("items").and_then(|n| Some((n.as_str()?, n)))
            && let Err(error) = template::check_expression(items)
        {
            self.push(
                &n.loc,
                format!("`items` of node `{id}` is not an expression: {error}"),
                Some("e.g. `outputs.plan.files` or `input.items`".into()),
            );
        }
        if kind == "map" {
            match node.get("node") {
                Some(body) if top => {
                    let body_kind = body.get("kind").and_then(Node::as_str);
                    if !matches!(body_kind, Some("agent" | "tool" | "workflow")) {
                        let loc = body.loc.clone();
                        self.push(
                            &loc,
                            format!(
                                "the `node` of map `{id}` must be of kind agent, tool or workflow"
                            ),
                            None,
                        );
                    }
                    self.node(body, false);
                }
                Some(_) => {}
                None => {
                    let loc = node.loc.clone();
                    self.push(
                        &loc,
                        format!("map node `{id}` needs `node` (what runs for each item)"),
                        None,
                    );
                }
            }
        }
    }

    /// Every template string under `value` parses.
    fn templates(&mut self, value: &Node) {
        match &value.value {
            NodeValue::Seq(items) => items.iter().for_each(|i| self.templates(i)),
            NodeValue::Map(entries) => entries.iter().for_each(|e| self.templates(&e.value)),
            NodeValue::Scalar(_) => {
                if let Some(text) = value.as_str()
                    && (text.contains("{{") || text.contains("{%"))
                    && let Err(error) = template::check(text)
                {
                    let loc = value.loc.clone();
                    self.push(&loc, format!("template does not parse: {error}"), None);
                }
            }
        }
    }

    /// The schema of a node's output, when it has one.
    fn output_schema(&self, node: &Node, depth: usize) -> Option<Value> {
        let kind = node.get("kind").and_then(Node::as_str)?;
        let doc_schema = |kind: Kind, field: &str| {
            let name = node.get(field)?.as_str()?;
            let doc = self.docs.get(kind, name)?;
            Some(doc.spec.as_ref()?.get("output")?.get("schema")?.to_json())
        };
        match kind {
            "agent" => doc_schema(Kind::Agent, "agent"),
            "workflow" => doc_schema(Kind::Workflow, "workflow"),
            "tool" => Some(node.get("output")?.get("schema")?.to_json()),
            "approval" => Some(approval_output_schema()),
            "map" if depth == 0 => {
                let items = self.output_schema(node.get("node")?, depth + 1)?;
                Some(json!({"type": "array", "items": items}))
            }
            _ => None,
        }
    }

    /// A condition reads typed values only: one operator, a pointer the schema has.
    fn condition(&mut self, when: &Node, from: &str, schema: Option<&Value>) {
        let operators: Vec<&str> = [
            "equals",
            "notEquals",
            "in",
            "greaterThan",
            "lessThan",
            "exists",
            "all",
            "any",
            "not",
        ]
        .into_iter()
        .filter(|op| when.get(op).is_some())
        .collect();
        if operators.len() != 1 {
            let loc = when.loc.clone();
            let found = match operators.is_empty() {
                true => "none".to_owned(),
                false => operators.join(", "),
            };
            self.push(&loc, format!("a condition needs exactly one of equals, notEquals, in, greaterThan, lessThan, exists, all, any, not (found: {found})"), None);
            return;
        }
        match operators[0] {
            "all" | "any" => {
                for inner in seq(when.get(operators[0])) {
                    self.condition(inner, from, schema);
                }
                return;
            }
            "not" => {
                if let Some(inner) = when.get("not") {
                    self.condition(inner, from, schema);
                }
                return;
            }
            _ => {}
        }
        let Some((path, path_node)) = when.get("path").and_then(|n| Some((n.as_str()?, n))) else {
            let loc = when.loc.clone();
            self.push(&loc, "a comparison needs `path`, a JSON pointer into the upstream node's output (e.g. `/severity`)".to_owned(), None);
            return;
        };
        let Some(schema) = schema else {
            let loc = path_node.loc.clone();
            self.push(
                &loc,
                format!("the condition reads `{path}` of node `{from}`, whose output has no schema"),
                Some("conditions compare typed values only: give the node's agent `output.schema` (a tool node its own `output.schema`)".into()),
            );
            return;
        };
        if let Err(error) = schema_at(schema, path) {
            let loc = path_node.loc.clone();
            self.push(
                &loc,
                format!("the condition reads `{path}` of node `{from}`, but {error}"),
                None,
            );
        }
    }

    /// Phases: names unique, nodes known and in one phase each, gates complete.
    fn phases(&mut self, name: &str, nodes: &[Node]) {
        let mut names = BTreeSet::new();
        let mut placed = BTreeSet::new();
        for phase in seq(self.spec.get("phases")) {
            if let Some((phase_name, n)) = phase.get("name").and_then(|n| Some((n.as_str()?, n)))
                && !names.insert(phase_name.to_owned())
            {
                self.push(
                    &n.loc,
                    format!("workflow `{name}` has two phases named `{phase_name}`"),
                    None,
                );
            }
            for (id, n) in strings(phase.get("nodes")) {
                if !nodes
                    .iter()
                    .any(|node| node.get("id").and_then(Node::as_str) == Some(id))
                {
                    self.push(
                        &n.loc,
                        format!("phase lists node `{id}`, which workflow `{name}` does not have"),
                        None,
                    );
                } else if !placed.insert(id.to_owned()) {
                    self.push(
                        &n.loc,
                        format!("node `{id}` is in two phases"),
                        Some("a node belongs to one phase".into()),
                    );
                }
            }
            let Some(gate) = phase.get("gate") else {
                continue;
            };
            match gate.get("kind").and_then(Node::as_str) {
                Some("command") if strings(gate.get("command")).is_empty() => {
                    let loc = gate.loc.clone();
                    self.push(
                        &loc,
                        "a `command` gate needs `command: [program, args…]`".to_owned(),
                        None,
                    );
                }
                Some("approval") if gate.get("message").is_none() => {
                    let loc = gate.loc.clone();
                    self.push(&loc, "an `approval` gate needs `message`".to_owned(), None);
                }
                Some("agent") => self.agent_gate(gate),
                _ => {}
            }
        }
    }

    fn agent_gate(&mut self, gate: &Node) {
        let Some((agent, n)) = gate.get("agent").and_then(|n| Some((n.as_str()?, n))) else {
            let loc = gate.loc.clone();
            self.push(
                &loc,
                "an `agent` gate needs `agent` and `pass`".to_owned(),
                None,
            );
            return;
        };
        let Some(doc) = self.docs.get(Kind::Agent, agent) else {
            let hint = missing_hint(agent, self.docs.agent_names(), "Agent", "agents");
            self.push(
                &n.loc,
                format!("the gate's agent `{agent}` is not defined"),
                Some(hint),
            );
            return;
        };
        let schema = doc
            .spec
            .as_ref()
            .and_then(|s| s.get("output")?.get("schema"))
            .map(Node::to_json);
        match gate.get("pass") {
            Some(pass) => self.condition(pass, agent, schema.as_ref()),
            None => {
                let loc = gate.loc.clone();
                self.push(&loc, "an `agent` gate needs `pass`, the condition on the verdict (e.g. `{path: /pass, equals: true}`)".to_owned(), None);
            }
        }
    }

    /// A workflow that runs itself through `workflow` nodes would never end.
    fn nesting_cycle(&mut self, name: &str) {
        let mut stack = vec![name.to_owned()];
        let mut seen = BTreeSet::new();
        while let Some(current) = stack.pop() {
            let Some(doc) = self.docs.get(Kind::Workflow, &current) else {
                continue;
            };
            let Some(spec) = doc.spec.as_ref() else {
                continue;
            };
            for node in seq(spec.get("nodes")) {
                let inner = node.get("node");
                for n in std::iter::once(node).chain(inner) {
                    let Some((nested, at)) = n.get("workflow").and_then(|w| Some((w.as_str()?, w)))
                    else {
                        continue;
                    };
                    if nested == name {
                        if current == name {
                            let loc = at.loc.clone();
                            self.push(
                                &loc,
                                format!(
                                    "workflow `{name}` runs itself (through node `{}`)",
                                    n.get("id").and_then(Node::as_str).unwrap_or("?")
                                ),
                                Some(
                                    "a workflow may not nest itself, directly or through others"
                                        .into(),
                                ),
                            );
                        } else {
                            let loc = self.doc.name_loc.clone();
                            self.push(
                                &loc,
                                format!(
                                    "workflow `{name}` runs itself through workflow `{current}`"
                                ),
                                Some(
                                    "a workflow may not nest itself, directly or through others"
                                        .into(),
                                ),
                            );
                        }
                        return;
                    }
                    if seen.insert(nested.to_owned()) {
                        stack.push(nested.to_owned());
                    }
                }
            }
        }
    }
}
