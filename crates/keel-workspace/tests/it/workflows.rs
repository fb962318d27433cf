//! `Workflow` documents: a valid one loads typed; each graph error — an unreachable node, a
//! condition reading a field the upstream output's schema lacks (or an upstream without a
//! schema), a cycle without a loop bound, a loop bound that closes no loop — and each wrong
//! reference or field is reported at its file:line:column. Agents' `output` and `subagents`
//! are checked too.

use keel_workspace::{LoadOptions, NodeKind};

use crate::support::{Load, located, workspace};

const BASE: &str = "\
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec: { provider: scripted, script: resources/script.yaml }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: classifier }
spec:
  model: default
  output:
    schema: { type: object, properties: { severity: { enum: [low, high] } }, required: [severity] }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: writer }
spec: { model: default }
";

/// A workflow document `flow` with `spec` (indented by two; a leading newline dropped).
fn flow(spec: &str) -> String {
    let spec = spec.strip_prefix('\n').unwrap_or(spec);
    format!(
        "{BASE}---\napiVersion: keel/v1\nkind: Workflow\nmetadata: {{ name: flow }}\nspec:\n{spec}"
    )
}

fn errors(spec: &str) -> Vec<String> {
    let ws = workspace();
    ws.write("config/flow.yaml", flow(spec));
    located(&ws.diagnostics(&LoadOptions::default()))
}

#[test]
fn a_valid_workflow_loads_typed() {
    let ws = workspace();
    ws.write(
        "config/flow.yaml",
        flow(
            r#"
  nodes:
    - { id: classify, kind: agent, agent: classifier, input: "{{ input }}" }
    - { id: write, kind: agent, agent: writer }
    - { id: ask, kind: approval, message: "Go?" }
  edges:
    - { from: classify, to: write, when: { path: /severity, equals: high } }
    - { from: classify, to: ask, when: { not: { path: /severity, in: [high] } } }
"#,
        ),
    );
    let loaded = ws.load_ok(&LoadOptions::default());
    let spec = &loaded.workflows["flow"];
    assert_eq!(spec.nodes[0].kind, NodeKind::Agent);
    assert_eq!(spec.edges.len(), 2);
}

#[test]
fn an_unreachable_node_is_reported_where_it_is_declared() {
    let errors = errors(
        r#"
  nodes:
    - { id: classify, kind: agent, agent: classifier }
    - { id: orphan, kind: agent, agent: writer }
"#,
    );
    assert_eq!(
        errors,
        [
            "config/flow.yaml:25:13: node `orphan` of workflow `flow` is unreachable: no edge leads to it from the start (`classify`)"
        ]
    );
}

#[test]
fn a_condition_on_a_field_the_upstream_schema_lacks_is_reported_at_its_path() {
    let errors = errors(
        r#"
  nodes:
    - { id: classify, kind: agent, agent: classifier }
    - { id: write, kind: agent, agent: writer }
    - { id: ask, kind: approval, message: "Go?" }
  edges:
    - { from: classify, to: write, when: { path: /priority, equals: 1 } }
    - { from: write, to: ask, when: { path: /done, equals: true } }
"#,
    );
    assert_eq!(
        errors,
        [
            "config/flow.yaml:28:50: the condition reads `/priority` of node `classify`, but the schema of the output has no field `priority` (it has: `severity`)",
            "config/flow.yaml:29:45: the condition reads `/done` of node `write`, whose output has no schema",
        ]
    );
}

#[test]
fn a_cycle_without_a_loop_bound_is_reported_at_the_edge_that_closes_it() {
    let errors = errors(
        r#"
  nodes:
    - { id: classify, kind: agent, agent: classifier }
    - { id: write, kind: agent, agent: writer }
  edges:
    - { from: classify, to: write }
    - { from: write, to: classify }
"#,
    );
    assert_eq!(
        errors,
        [
            "config/flow.yaml:28:7: workflow `flow` has a cycle without a loop bound: classify → write → classify"
        ]
    );
    // With a bound it loads.
    let ws = workspace();
    ws.write(
        "config/flow.yaml",
        flow(
            r#"
  nodes:
    - { id: classify, kind: agent, agent: classifier }
    - { id: write, kind: agent, agent: writer }
  edges:
    - { from: classify, to: write }
    - { from: write, to: classify, maxIterations: 3 }
"#,
        ),
    );
    ws.load_ok(&LoadOptions::default());
}

#[test]
fn references_fields_templates_and_bounds_are_checked() {
    let errors = errors(
        r#"
  nodes:
    - { id: a, kind: agent, agent: clasifier, tool: read_file }
    - { id: b, kind: tool, tool: nope, input: "{{ unclosed" }
    - { id: c, kind: map, items: "outputs.a.items" }
    - { id: a, kind: workflow, workflow: flow }
  edges:
    - { from: a, to: b }
    - { from: b, to: c, maxIterations: 2 }
    - { from: c, to: zz }
"#,
    );
    let text = errors.join("\n");
    for expected in [
        "node `a` runs agent `clasifier`, which is not defined",
        "`tool` has no effect on a `agent` node (`a`)",
        "node `b` calls tool `nope`, which is not defined",
        "`input` has no effect on a `tool` node (`b`)",
        "template does not parse",
        "map node `c` needs `node`",
        "workflow `flow` has two nodes with id `a`",
        "workflow `flow` runs itself (through node `a`)",
        "edge `b` → `c` has `maxIterations` but closes no loop",
        "edge `to` names node `zz`, which workflow `flow` does not have",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    assert!(
        errors.iter().all(|e| e.starts_with("config/flow.yaml:")),
        "{text}"
    );
}

#[test]
fn agents_output_schemas_and_subagents_are_checked() {
    let ws = workspace();
    ws.write(
        "config/agents.yaml",
        format!(
            "{BASE}---\napiVersion: keel/v1\nkind: Agent\nmetadata: {{ name: lead }}\nspec:\n  model: default\n  subagents: [writer, ghost]\n  output: {{ schema: {{ type: objekt }} }}\n---\napiVersion: keel/v1\nkind: Agent\nmetadata: {{ name: solo }}\nspec:\n  model: default\n  tools: [task]\n"
        ),
    );
    let errors = located(&ws.diagnostics(&LoadOptions::default()));
    let text = errors.join("\n");
    assert!(
        text.contains(
            "config/agents.yaml:24:23: agent `lead` lists subagent `ghost`, which is not defined"
        ),
        "{text}"
    );
    assert!(
        text.contains("`output.schema` of agent `lead` is not a usable JSON Schema"),
        "{text}"
    );
    assert!(
        text.contains("agent `solo` lists `task` but no `subagents`"),
        "{text}"
    );
}
