//! A workflow's graph, as both `keel validate` and the runtime read it: which nodes start,
//! which forward edges lead where, which edges loop back, what cannot be reached, and where
//! a JSON pointer lands in an output's schema.
//!
//! Forward edges (those without `maxIterations`) must form a DAG; a loop edge goes back to a
//! node that reaches its source along forward edges, and is taken a bounded number of times.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::WorkflowSpec;

/// A workflow's nodes (by index, in declaration order) and edges.
#[derive(Debug, Clone, Default)]
pub struct WorkflowGraph {
    pub ids: Vec<String>,
    index: HashMap<String, usize>,
    /// `(from, to, is_loop)` of every edge whose ends both exist, in declaration order.
    pub edges: Vec<(usize, usize, bool)>,
    /// For each of `edges`, its index in the list the graph was made from (`spec.edges`).
    pub declared: Vec<usize>,
    /// The start nodes.
    pub starts: Vec<usize>,
}

impl WorkflowGraph {
    /// The graph of a typed workflow.
    pub fn of(spec: &WorkflowSpec) -> Self {
        Self::new(
            spec.nodes.iter().map(|n| n.id.as_str()),
            spec.start.iter().map(String::as_str),
            spec.edges
                .iter()
                .map(|e| (e.from.as_str(), e.to.as_str(), e.max_iterations.is_some())),
        )
    }

    /// A graph from ids, start ids (none: the first node) and `(from, to, is_loop)` edges;
    /// names that are not node ids are left out (validation reports them).
    pub fn new<'a>(
        ids: impl IntoIterator<Item = &'a str>,
        starts: impl IntoIterator<Item = &'a str>,
        edges: impl IntoIterator<Item = (&'a str, &'a str, bool)>,
    ) -> Self {
        let mut graph = Self::default();
        for id in ids {
            if !graph.index.contains_key(id) {
                graph.index.insert(id.to_owned(), graph.ids.len());
                graph.ids.push(id.to_owned());
            }
        }
        graph.starts = starts.into_iter().filter_map(|s| graph.find(s)).collect();
        if graph.starts.is_empty() && !graph.ids.is_empty() {
            graph.starts.push(0);
        }
        (graph.edges, graph.declared) = edges
            .into_iter()
            .enumerate()
            .filter_map(|(i, (from, to, looped))| {
                Some(((graph.find(from)?, graph.find(to)?, looped), i))
            })
            .unzip();
        graph
    }

    /// The index of node `id`.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The forward edges into `node`, as `(edge index, from)`.
    pub fn incoming(&self, node: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.edges
            .iter()
            .enumerate()
            .filter(move |(_, (_, to, looped))| *to == node && !looped)
            .map(|(i, (from, _, _))| (i, *from))
    }

    /// Nodes no edge path from a start reaches.
    pub fn unreachable(&self) -> Vec<usize> {
        let mut seen = vec![false; self.ids.len()];
        let mut stack = self.starts.clone();
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut seen[node], true) {
                continue;
            }
            stack.extend(
                self.edges
                    .iter()
                    .filter(|(from, _, _)| *from == node)
                    .map(|(_, to, _)| *to),
            );
        }
        (0..self.ids.len()).filter(|i| !seen[*i]).collect()
    }

    /// A cycle of forward edges (a loop with no bound), as node indexes with the first
    /// repeated at the end.
    pub fn unbounded_cycle(&self) -> Option<Vec<usize>> {
        // Depth-first search with colours: 0 new, 1 on the stack, 2 done.
        fn visit(
            graph: &WorkflowGraph,
            node: usize,
            colour: &mut [u8],
            path: &mut Vec<usize>,
        ) -> Option<Vec<usize>> {
            colour[node] = 1;
            path.push(node);
            for &(from, to, looped) in &graph.edges {
                if from != node || looped {
                    continue;
                }
                if colour[to] == 1 {
                    let at = path.iter().position(|n| *n == to).unwrap_or(0);
                    let mut cycle = path[at..].to_vec();
                    cycle.push(to);
                    return Some(cycle);
                }
                if colour[to] == 0
                    && let Some(cycle) = visit(graph, to, colour, path)
                {
                    return Some(cycle);
                }
            }
            path.pop();
            colour[node] = 2;
            None
        }
        let mut colour = vec![0u8; self.ids.len()];
        for node in 0..self.ids.len() {
            if colour[node] == 0
                && let Some(cycle) = visit(self, node, &mut colour, &mut Vec::new())
            {
                return Some(cycle);
            }
        }
        None
    }

    /// Whether `to` reaches `from` along forward edges (so an edge `from → to` closes a loop).
    pub fn reaches(&self, to: usize, from: usize) -> bool {
        self.body(to, from).contains(&from)
    }

    /// The nodes on forward paths from `start` to `end`, both included when `end` is reached:
    /// what a loop edge `end → start` runs again.
    pub fn body(&self, start: usize, end: usize) -> BTreeSet<usize> {
        // Forward-reachable from `start` …
        let mut down = vec![false; self.ids.len()];
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut down[node], true) {
                continue;
            }
            stack.extend(
                self.edges
                    .iter()
                    .filter(|(f, _, l)| *f == node && !l)
                    .map(|(_, t, _)| *t),
            );
        }
        // … and backward-reachable from `end`.
        let mut up = vec![false; self.ids.len()];
        let mut stack = vec![end];
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut up[node], true) {
                continue;
            }
            stack.extend(
                self.edges
                    .iter()
                    .filter(|(_, t, l)| *t == node && !l)
                    .map(|(f, _, _)| *f),
            );
        }
        (0..self.ids.len()).filter(|i| down[*i] && up[*i]).collect()
    }

    /// Nodes without forward edges out of them: their outputs make the default result.
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.ids.len())
            .filter(|n| !self.edges.iter().any(|(f, _, l)| f == n && !l))
            .collect()
    }
}

/// The part of JSON Schema `schema` that JSON pointer `pointer` reads, following
/// `properties`, `items`, `prefixItems`, `additionalProperties` and the branches of
/// `allOf`/`anyOf`/`oneOf`. An error says which field the schema lacks and which it has.
pub fn schema_at<'a>(schema: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    if pointer.is_empty() {
        return Ok(schema);
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "`{pointer}` is not a JSON pointer (it must start with `/`)"
        ));
    };
    let mut current = schema;
    let mut walked = String::new();
    for raw in rest.split('/') {
        let token = raw.replace("~1", "/").replace("~0", "~");
        current = step(current, &token).ok_or_else(|| {
            let at = if walked.is_empty() {
                "the output".to_owned()
            } else {
                format!("`{walked}`")
            };
            let known = fields(current);
            match known.is_empty() {
                true => format!("the schema of {at} has no field `{token}`"),
                false => format!(
                    "the schema of {at} has no field `{token}` (it has: {})",
                    known.join(", ")
                ),
            }
        })?;
        walked.push('/');
        walked.push_str(raw);
    }
    Ok(current)
}

fn step<'a>(schema: &'a Value, token: &str) -> Option<&'a Value> {
    if let Some(found) = schema.get("properties").and_then(|p| p.get(token)) {
        return Some(found);
    }
    if token.parse::<usize>().is_ok() || token == "-" {
        if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
            return Some(items);
        }
        if let (Ok(i), Some(Value::Array(prefix))) =
            (token.parse::<usize>(), schema.get("prefixItems"))
            && let Some(item) = prefix.get(i)
        {
            return Some(item);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key)
            && let Some(found) = branches.iter().find_map(|b| step(b, token))
        {
            return Some(found);
        }
    }
    schema.get("additionalProperties").filter(|a| a.is_object())
}

fn fields(schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(|k| format!("`{k}`")).collect())
        .unwrap_or_default();
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for branch in branches {
                names.extend(fields(branch));
            }
        }
    }
    names
}

/// The schema of an approval node's output.
pub fn approval_output_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "decidedBy": {"type": "string"},
            "reason": {"type": "string"}
        },
        "required": ["approved"]
    })
}

/// The workflow as a Mermaid flowchart: each node with its kind and what it runs, each edge
/// with its condition, loop edges dotted with their bound, phases as subgraphs.
pub fn mermaid(spec: &WorkflowSpec) -> String {
    let mut out = String::from("flowchart TD\n");
    let label = |node: &crate::NodeSpec| {
        let what = node
            .agent
            .as_deref()
            .or(node.tool.as_deref())
            .or(node.workflow.as_deref())
            .or(node.items.as_deref())
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        format!(
            "{}[\"{} ({}{})\"]",
            node.id,
            node.id,
            node.kind.as_str(),
            quote(&what)
        )
    };
    let mut placed = BTreeSet::new();
    for (i, phase) in spec.phases.iter().enumerate() {
        out.push_str(&format!(
            "  subgraph phase{i}[\"phase {}\"]\n",
            quote(&phase.name)
        ));
        for node in spec.nodes.iter().filter(|n| phase.nodes.contains(&n.id)) {
            out.push_str(&format!("    {}\n", label(node)));
            placed.insert(node.id.clone());
        }
        out.push_str("  end\n");
    }
    for node in spec.nodes.iter().filter(|n| !placed.contains(&n.id)) {
        out.push_str(&format!("  {}\n", label(node)));
    }
    for edge in &spec.edges {
        let condition = edge.when.as_ref().map(describe_condition);
        let line = match (edge.max_iterations, condition) {
            (Some(max), Some(c)) => format!(
                "  {} -. \"{} (at most {max}×)\" .-> {}",
                edge.from,
                quote(&c),
                edge.to
            ),
            (Some(max), None) => format!("  {} -. \"at most {max}×\" .-> {}", edge.from, edge.to),
            (None, Some(c)) => format!("  {} -- \"{}\" --> {}", edge.from, quote(&c), edge.to),
            (None, None) => format!("  {} --> {}", edge.from, edge.to),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A condition in words: `/severity == "high"`, `all(…)`.
pub fn describe_condition(condition: &crate::Condition) -> String {
    let path = condition.path.as_deref().unwrap_or("");
    let list = |items: &[crate::Condition]| {
        items
            .iter()
            .map(describe_condition)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(all) = &condition.all {
        return format!("all({})", list(all));
    }
    if let Some(any) = &condition.any {
        return format!("any({})", list(any));
    }
    if let Some(not) = &condition.not {
        return format!("not({})", describe_condition(not));
    }
    if let Some(v) = &condition.equals {
        return format!("{path} == {v}");
    }
    if let Some(v) = &condition.not_equals {
        return format!("{path} != {v}");
    }
    if let Some(v) = &condition.one_of {
        return format!("{path} in {}", Value::Array(v.clone()));
    }
    if let Some(v) = condition.greater_than {
        return format!("{path} > {v}");
    }
    if let Some(v) = condition.less_than {
        return format!("{path} < {v}");
    }
    match condition.exists {
        Some(true) => format!("{path} exists"),
        Some(false) => format!("{path} is absent"),
        None => path.to_owned(),
    }
}

/// Text safe inside a Mermaid quoted label.
fn quote(text: &str) -> String {
    text.replace('"', "#quot;")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pointer_follows_properties_items_and_branches() {
        let schema = json!({"type": "object", "properties": {
            "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}}}},
            "verdict": {"anyOf": [{"type": "object", "properties": {"pass": {"type": "boolean"}}}]}
        }});
        assert_eq!(
            schema_at(&schema, "/files/0/path").unwrap(),
            &json!({"type": "string"})
        );
        assert_eq!(
            schema_at(&schema, "/verdict/pass").unwrap(),
            &json!({"type": "boolean"})
        );
        let error = schema_at(&schema, "/severity").unwrap_err();
        assert_eq!(
            error,
            "the schema of the output has no field `severity` (it has: `files`, `verdict`)"
        );
        assert!(schema_at(&schema, "severity").is_err());
    }

    #[test]
    fn forward_cycles_are_found_and_loop_edges_close_them() {
        let graph = WorkflowGraph::new(
            ["a", "b", "c"],
            [],
            [("a", "b", false), ("b", "c", false), ("c", "b", false)],
        );
        assert_eq!(graph.unbounded_cycle(), Some(vec![1, 2, 1]));
        let bounded = WorkflowGraph::new(
            ["a", "b", "c"],
            [],
            [("a", "b", false), ("b", "c", false), ("c", "b", true)],
        );
        assert_eq!(bounded.unbounded_cycle(), None);
        assert!(bounded.reaches(1, 2));
        assert_eq!(
            bounded.body(1, 2).into_iter().collect::<Vec<_>>(),
            vec![1, 2]
        );
        let island = WorkflowGraph::new(["a", "b", "c"], [], [("b", "c", false)]);
        assert_eq!(island.unreachable(), vec![1, 2]);
        assert_eq!(island.sinks(), vec![0, 2]);
    }
}
