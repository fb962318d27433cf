//! A workflow workspace shared by the SDK's and the CLI's workflow tests: `triage` plans ten
//! items (tool `plan`, typed output), records each (a `map` over tool `record`, three at a
//! time), has agent `classifier` (structured output) classify the ticket, asks a person when
//! the severity is `high` (approval node), then runs nested workflow `notify`; a `low`
//! severity takes the other branch. Tool `record` appends its arguments to `effects.log`,
//! one line per call: the side-effect log.

use crate::{OPENAI_MOCK_MODEL, WorkspaceBuilder};

/// Tool `plan`: ten items as JSON.
const PLAN_TOOL: &str = r#"
description: Plans the work.
schema: { type: object }
impl: { kind: command, command: ["sh", "-c", "cat > /dev/null; echo '{\"items\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}'"], timeout: 30s }
policy: allow
"#;

/// Tool `record`: appends its JSON arguments to `effects.log` and answers `{"recorded": true}`.
const RECORD_TOOL: &str = r#"
description: Records an entry in the side-effect log.
schema: { type: object, properties: { entry: { type: string } }, required: [entry] }
impl: { kind: command, command: ["sh", "-c", "line=$(cat); echo \"$line\" >> effects.log; echo '{\"recorded\": true}'"], timeout: 30s }
policy: allow
"#;

const WORKFLOWS: &str = r#"
apiVersion: keel/v1
kind: Workflow
metadata: { name: triage }
spec:
  description: Plan, record each item, classify, ask a person for high severity, notify.
  input:
    schema: { type: object, properties: { ticket: { type: string } }, required: [ticket] }
  nodes:
    - id: plan
      kind: tool
      tool: plan
      output:
        schema: { type: object, properties: { items: { type: array, items: { type: integer } } }, required: [items] }
    - id: each
      kind: map
      items: outputs.plan.items
      concurrency: 3
      node: { kind: tool, tool: record, arguments: { entry: "item {{ item }}" } }
    - id: classify
      kind: agent
      agent: classifier
      input: "Ticket {{ input.ticket }} touched {{ outputs.each | length }} items. Classify it."
    - id: gate
      kind: approval
      message: "Ship the {{ outputs.classify.severity }} fix for {{ input.ticket }}?"
    - id: low
      kind: join
    - id: notify
      kind: workflow
      workflow: notify
      input: { ticket: "{{ input.ticket }}" }
    - id: done
      kind: join
  edges:
    - { from: plan, to: each }
    - { from: each, to: classify }
    - { from: classify, to: gate, when: { path: /severity, equals: high } }
    - { from: classify, to: low, when: { path: /severity, equals: low } }
    - { from: gate, to: notify }
    - { from: notify, to: done }
    - { from: low, to: done }
---
apiVersion: keel/v1
kind: Workflow
metadata: { name: notify }
spec:
  input:
    schema: { type: object, properties: { ticket: { type: string } }, required: [ticket] }
  nodes:
    - id: send
      kind: tool
      tool: record
      arguments: { entry: "notify {{ input.ticket }}" }
"#;

/// The triage workspace, its model `mock` at `base_url` (answer the classifier with
/// `{"severity": "high"}` or `"low"`).
pub fn triage_workspace(base_url: &str) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{base_url}\", model: {OPENAI_MOCK_MODEL}, timeout: 5s }}"
            ),
        )
        .agent(
            "classifier",
            "  model: mock\n  instructions: You classify tickets.\n  output:\n    schema: { type: object, properties: { severity: { enum: [low, high] } }, required: [severity] }\n",
        )
        .tool("plan", PLAN_TOOL)
        .tool("record", RECORD_TOOL)
        .yaml(WORKFLOWS)
}
