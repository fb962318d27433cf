//! Broken workspaces: every problem is reported at once, located, with a hint.

use keel_workspace::{LoadError, LoadOptions};

use crate::support::{Load, MODEL_AND_AGENT, env, located, workspace};

/// Several unrelated mistakes across two files.
#[test]
fn a_broken_workspace_reports_every_error_together() {
    let ws = workspace();
    ws.write(
        "config/agents.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec:
  provider: openai
  model: ${MODEL_NAME}
---
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: gpt
  tools: [read_file, get_wether]
  instructionz: Be brief.
",
    );
    ws.write(
        "config/tools.yaml",
        "\
apiVersion: keel/v1
kind: Tool
metadata: { name: get_weather }
spec:
  description: [unclosed
",
    );
    let err = ws.load_with(&env(&[])).unwrap_err();
    assert!(
        matches!(&err, LoadError::Invalid(d) if d.len() == 5),
        "{err}"
    );
    insta::assert_snapshot!(err.to_string());
    assert!(!err.to_string().contains(&ws.path().display().to_string()));
}

#[test]
fn unknown_kinds_suggest_the_closest_and_unsupported_kinds_say_so() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Agnet
metadata: { name: a }
spec: {}
---
apiVersion: keel/v1
kind: Skill
metadata: { name: audit }
spec: {}
---
apiVersion: keel/v1
kind: Frobnicator
metadata: { name: f }
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(
        located(&diagnostics),
        [
            "config/a.yaml:2:7: unknown kind `Agnet`",
            "config/a.yaml:7:7: kind `Skill` is not supported yet",
            "config/a.yaml:12:7: unknown kind `Frobnicator`",
        ]
    );
    assert_eq!(
        diagnostics[0].hint.as_deref(),
        Some(
            "did you mean `Agent`? valid kinds are `Runtime`, `Model`, `Tool`, `Agent`, `Policy`, `Hook`, `McpServer`, `Memory`, `Workflow`, `Eval`, `RemoteAgent`"
        )
    );
    assert_eq!(
        diagnostics[2].hint.as_deref(),
        Some(
            "valid kinds are `Runtime`, `Model`, `Tool`, `Agent`, `Policy`, `Hook`, `McpServer`, `Memory`, `Workflow`, `Eval`, `RemoteAgent`"
        )
    );
}

#[test]
fn duplicate_names_point_at_the_second_and_mention_the_first() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/b.yaml",
        "\
apiVersion: keel/v1
kind: Agent
metadata:
  name: assistant
spec: { model: default }
---
apiVersion: keel/v1
kind: Runtime
spec: {}
---
apiVersion: keel/v1
kind: Runtime
metadata: { name: other }
spec: {}
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(
        located(&diagnostics),
        [
            "config/b.yaml:4:9: duplicate Agent `assistant`; it is first defined at config/a.yaml:10",
            "config/b.yaml:13:19: more than one Runtime document; the first is at config/b.yaml:7",
        ]
    );
}

#[test]
fn envelope_problems_are_reported() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v2
kind: Model
metadata: { name: m, labels: {} }
spec: { provider: scripted, script: s.yaml }
extra: 1
---
kind: Agent
metadata: { name: \"bad name\" }
spec: { model: m }
---
apiVersion: keel/v1
kind: Agent
spec: { model: m }
---
- just a list
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(
        located(&diagnostics),
        [
            "config/a.yaml:1:13: unsupported apiVersion `keel/v2`",
            "config/a.yaml:3:22: unknown field `labels` in `metadata`",
            "config/a.yaml:5:1: unknown field `extra` in Model `m`",
            "config/a.yaml:7:1: missing `apiVersion`",
            "config/a.yaml:8:19: invalid name `bad name` for Agent",
            "config/a.yaml:11:1: missing `metadata.name` in Agent document",
            "config/a.yaml:15:1: a document must be a mapping",
        ]
    );
}

#[test]
fn schema_errors_are_worded_for_people() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: m }
spec:
  provider: opnai
  params: { temperature: hot, maxTokens: 10 }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: a }
spec:
  tools: read_file
  limits: { maxSteps: 0, runTimeout: 10 parsecs, maxStep: 3 }
---
apiVersion: keel/v1
kind: Tool
metadata: { name: t }
spec:
  description: d
  impl: { kind: process, command: [x] }
  policy: maybe
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let rendered: Vec<String> = diagnostics.iter().map(|d| format!("{d}")).collect();
    insta::assert_snapshot!(rendered.join("\n"));
}

#[test]
fn semantic_checks_between_documents() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Runtime
spec: { defaultAgent: asistant }
---
apiVersion: keel/v1
kind: Model
metadata: { name: scripted }
spec: { provider: scripted }
---
apiVersion: keel/v1
kind: Model
metadata: { name: openai }
spec: { provider: openai }
---
apiVersion: keel/v1
kind: Model
metadata: { name: claude }
spec: { provider: anthropic, fallbacks: [claude, nope] }
---
apiVersion: keel/v1
kind: Tool
metadata: { name: read_file }
spec:
  description: shadows a built-in
  impl: { kind: command, command: [cat] }
---
apiVersion: keel/v1
kind: Tool
metadata: { name: not_object }
spec:
  description: d
  schema: { type: string }
  impl: { kind: command, command: [x] }
---
apiVersion: keel/v1
kind: Tool
metadata: { name: bad_schema }
spec:
  description: d
  schema: { type: object, properties: { city: { type: strin } }, required: city }
  impl: { kind: command, command: [x] }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: scripted
  tools: [read_file]
  contract: { requiredTools: [grep] }
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let rendered: Vec<String> = diagnostics.iter().map(|d| format!("{d}")).collect();
    insta::assert_snapshot!(rendered.join("\n"));
}

#[test]
fn dangling_model_hint_lists_models_or_explains_how_to_add_one() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: zzz }\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(
        located(&diagnostics),
        ["config/a.yaml:4:16: agent `a` uses model `zzz` which is not defined"]
    );
    assert_eq!(
        diagnostics[0].hint.as_deref(),
        Some("no models are defined; add a `kind: Model` document named `zzz`")
    );
}

#[test]
fn unreadable_yaml_in_one_file_does_not_hide_other_files() {
    let ws = workspace();
    ws.write("config/a.yaml", "key: [1, 2\nother: 3\n");
    ws.write("config/b.yaml", "a: b: c\n");
    ws.write("config/c.yaml", MODEL_AND_AGENT);
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let files: Vec<_> = diagnostics
        .iter()
        .map(|d| d.file.display().to_string())
        .collect();
    assert_eq!(files, ["config/a.yaml", "config/b.yaml"]);
    assert!(
        diagnostics
            .iter()
            .all(|d| d.message.starts_with("invalid YAML"))
    );
}

/// An agent's `facade`: a clamp whose `min` is above its `max` fits no value; an unknown
/// parameter in `allow` is a schema error naming the choices.
#[test]
fn a_facade_clamp_that_fits_no_value_is_an_error() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: scripted }
spec: { provider: openai, model: gpt-x }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: scripted
  facade:
    allow: [temperature, logitBias]
    clamp: { maxTokens: 4096, temperature: { min: 1.5, max: 0.5 }, topP: { max: 0.9 } }
",
    );
    let rendered: Vec<String> = ws
        .diagnostics(&LoadOptions::default())
        .iter()
        .map(|d| format!("{d}"))
        .collect();
    let all = rendered.join("\n");
    assert_eq!(rendered.len(), 2, "{all}");
    assert!(
        all.contains("`facade.clamp.temperature` has min 1.5 above max 0.5"),
        "{all}"
    );
    assert!(all.contains("logitBias"), "{all}");
    assert!(!all.contains("clamp.topP"), "{all}");
}

#[test]
fn a_facade_loads_with_its_defaults_and_bounds() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: scripted }
spec: { provider: openai, model: gpt-x }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: open }
spec: { model: scripted }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: bounded }
spec:
  model: scripted
  facade: { allow: [temperature], clamp: { temperature: { max: 1 } } }
",
    );
    let workspace = ws.load_ok(&LoadOptions::default());
    let open = &workspace.agents["open"].facade;
    assert!(
        keel_workspace::FacadeParam::ALL
            .iter()
            .all(|p| open.allows(*p))
    );
    let bounded = &workspace.agents["bounded"].facade;
    assert!(bounded.allows(keel_workspace::FacadeParam::Temperature));
    assert!(!bounded.allows(keel_workspace::FacadeParam::Seed));
    let bounds = bounded.clamp.temperature.unwrap();
    assert_eq!((bounds.clamp(1.7), bounds.clamp(0.3)), (1.0, 0.3));
}
