//! Valid workspaces load into typed documents.

use std::time::Duration as StdDuration;

use keel_workspace::{
    ApiKeyRole, LoadError, LoadOptions, NarrationStyle, PolicyDecision, ProviderKind, ToolImpl,
    Workspace,
};
use serde_json::json;

use keel_test_support::TempWorkspace;

use crate::support::{Load, env, workspace};

const FULL: &str = r#"
apiVersion: keel/v1
kind: Runtime
metadata: { name: default }
spec:
  defaultAgent: assistant
  store: { url: "sqlite://.keel/keel.db" }
  server:
    listen: "127.0.0.1:9000"
    apiKeys: [{ env: KEEL_OPERATOR_KEY, role: operator }, { env: KEEL_CLIENT_KEY, role: client }]
  limits: { maxConcurrentRuns: 4, maxSteps: 12, runTimeout: 10m, maxToolOutputBytes: 1024 }
  retry: { model: { maxAttempts: 2, initialBackoff: 250ms, maxBackoff: 8s } }
  progress: { narration: { enabled: false, style: verbose } }
  cli: { events: { include: ["runtime.*"] } }
"#;

const MODELS: &str = r#"
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec:
  provider: openai
  baseUrl: "${OPENAI_BASE_URL:-https://api.openai.com/v1}"
  model: gpt-4o-mini
  apiKeyEnv: OPENAI_API_KEY
  timeout: 30s
  params: { temperature: 0.2, maxTokens: 2048 }
---
apiVersion: keel/v1
kind: Model
metadata: { name: offline }
spec:
  provider: scripted
  script: resources/scripts/demo.yaml
  stream: false
"#;

const TOOLS_AND_AGENTS: &str = r#"
apiVersion: keel/v1
kind: Tool
metadata: { name: get_weather }
spec:
  description: Current weather for a city.
  schema: { type: object, properties: { city: { type: string } }, required: [city], additionalProperties: false }
  impl: { kind: command, command: ["python3", "resources/tools/weather.py"], timeout: 10s, env: { UNITS: metric } }
  policy: allow
  idempotent: true
---
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: default
  instructions: "You are a careful assistant."
  tools: [read_file, list_dir, grep, get_weather]
  limits: { maxSteps: 16, runTimeout: 2m }
  contract: { requiredTools: [get_weather] }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: offline-helper }
spec:
  model: offline
"#;

fn full_workspace() -> TempWorkspace {
    let ws = workspace();
    ws.write("config/runtime.yaml", FULL);
    ws.write("config/models/models.yml", MODELS);
    ws.write("config/agents.yaml", TOOLS_AND_AGENTS);
    ws
}

#[test]
fn a_workspace_with_all_four_kinds_loads_typed() {
    let ws = full_workspace();
    let loaded = ws.load_ok(&LoadOptions::default());

    assert_eq!(loaded.root, std::fs::canonicalize(ws.path()).unwrap());
    let rt = &loaded.runtime;
    assert_eq!(rt.default_agent.as_deref(), Some("assistant"));
    assert_eq!(rt.server.listen, "127.0.0.1:9000");
    assert_eq!(rt.server.api_keys[0].role, ApiKeyRole::Operator);
    assert_eq!(rt.server.api_keys[1].env, "KEEL_CLIENT_KEY");
    assert_eq!(rt.limits.max_steps, 12);
    assert_eq!(rt.limits.run_timeout.0, StdDuration::from_secs(600));
    assert_eq!(
        rt.limits.max_parallel_tools, 8,
        "unset fields keep their defaults"
    );
    assert_eq!(
        rt.retry.model.initial_backoff.0,
        StdDuration::from_millis(250)
    );
    assert!(!rt.progress.narration.enabled);
    assert_eq!(rt.progress.narration.style, NarrationStyle::Verbose);
    assert_eq!(rt.cli.events.include, ["runtime.*"]);

    assert_eq!(
        loaded.models.keys().collect::<Vec<_>>(),
        ["default", "offline"]
    );
    let openai = &loaded.models["default"];
    assert_eq!(openai.provider, ProviderKind::Openai);
    assert_eq!(
        openai.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(openai.params.temperature, Some(0.2));
    assert_eq!(openai.params.max_tokens, Some(2048));
    assert_eq!(
        openai.timeout.map(|d| d.0),
        Some(StdDuration::from_secs(30))
    );
    assert!(openai.stream);
    let scripted = &loaded.models["offline"];
    assert_eq!(scripted.provider, ProviderKind::Scripted);
    assert!(!scripted.stream);

    let tool = &loaded.tools["get_weather"];
    assert_eq!(tool.description, "Current weather for a city.");
    assert_eq!(tool.schema["required"], json!(["city"]));
    assert_eq!(tool.policy, Some(PolicyDecision::Allow));
    assert!(tool.idempotent);
    let ToolImpl::Command {
        command,
        timeout,
        env,
    } = &tool.implementation
    else {
        panic!("a command tool: {:?}", tool.implementation);
    };
    assert_eq!(command, &["python3", "resources/tools/weather.py"]);
    assert_eq!(timeout.map(|d| d.0), Some(StdDuration::from_secs(10)));
    assert_eq!(env["UNITS"], "metric");

    let agent = &loaded.agents["assistant"];
    assert_eq!(agent.model, "default");
    assert_eq!(
        agent.tools,
        ["read_file", "list_dir", "grep", "get_weather"]
    );
    assert_eq!(agent.limits.max_steps, Some(16));
    assert_eq!(
        agent.limits.run_timeout.map(|d| d.0),
        Some(StdDuration::from_secs(120))
    );
    assert_eq!(agent.contract.required_tools, ["get_weather"]);
    let helper = &loaded.agents["offline-helper"];
    assert!(helper.tools.is_empty());
    assert_eq!(helper.instructions, "");

    assert_eq!(loaded.default_agent(), Some("assistant"));
}

#[test]
fn an_empty_config_folder_is_a_valid_workspace_with_defaults() {
    let ws = workspace();
    let loaded = ws.load_ok(&LoadOptions::default());
    assert!(loaded.agents.is_empty());
    assert_eq!(loaded.runtime, keel_workspace::RuntimeSpec::default());
    assert_eq!(loaded.default_agent(), None);
}

#[test]
fn the_only_agent_is_the_default_agent_and_a_runtime_needs_no_name() {
    let ws = workspace();
    ws.write("config/a.yaml", crate::support::MODEL_AND_AGENT);
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  limits: { maxSteps: 3 }\n",
    );
    let loaded = ws.load_ok(&LoadOptions::default());
    assert_eq!(loaded.runtime.limits.max_steps, 3);
    assert_eq!(loaded.default_agent(), Some("assistant"));
    assert!(
        loaded
            .explain()
            .iter()
            .any(|e| e.path == "Runtime/default.spec.limits.maxSteps")
    );
}

#[test]
fn keel_and_resources_folders_are_not_read_as_config() {
    let ws = workspace();
    ws.write("config/a.yaml", crate::support::MODEL_AND_AGENT);
    ws.write(".keel/runs/x.yaml", "not: [valid");
    ws.write("resources/scripts/demo.yaml", "kind: Bogus\n");
    ws.write("config/.hidden/draft.yaml", "kind: Bogus\n");
    ws.write("config/notes.txt", "kind: Bogus\n");
    let loaded = ws.load_ok(&LoadOptions::default());
    assert_eq!(loaded.agents.len(), 1);
}

#[test]
fn a_missing_folder_or_config_folder_is_not_a_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = Workspace::load_with(&missing, &LoadOptions::default()).unwrap_err();
    let LoadError::NotAWorkspace { path, reason } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &missing);
    assert!(reason.contains("keel init"), "{reason}");

    let err = Workspace::load_with(dir.path(), &LoadOptions::default()).unwrap_err();
    let LoadError::NotAWorkspace { reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(reason.contains("no `config/` folder"), "{reason}");
    assert!(reason.contains("keel init"), "{reason}");
}

#[test]
fn interpolated_whole_scalars_are_resolved_as_yaml_values() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Runtime
spec:
  limits:
    maxSteps: ${STEPS:-8}
    maxConcurrentRuns: ${RUNS}
  progress:
    narration:
      enabled: ${NARRATE:-true}
  server: { listen: \"${LISTEN:-42}\" }
",
    );
    let loaded = ws.load_ok(&env(&[("RUNS", "5"), ("NARRATE", "false")]));
    assert_eq!(loaded.runtime.limits.max_steps, 8);
    assert_eq!(loaded.runtime.limits.max_concurrent_runs, 5);
    assert!(!loaded.runtime.progress.narration.enabled);
    assert_eq!(
        loaded.runtime.server.listen, "42",
        "quoted scalars stay strings"
    );
}
