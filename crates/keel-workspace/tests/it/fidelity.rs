//! Nothing a user writes is silently ignored: fields without effect are errors, a workspace
//! with nothing to run is an error, and bytes that are not UTF-8 are located.

use keel_workspace::{LoadOptions, Workspace};

use crate::support::{Load, MODEL_AND_AGENT, env, located, workspace};

#[test]
fn a_store_url_that_does_not_fit_its_kind_is_an_error_at_its_value() {
    let ws = workspace();
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    let runtime = |store: &str| {
        ws.write(
            "config/runtime.yaml",
            format!("apiVersion: keel/v1\nkind: Runtime\nspec:\n  store:\n{store}"),
        );
        located(&ws.diagnostics(&env(&[])))
    };
    assert_eq!(
        runtime("    url: mysql://db/keel\n"),
        [
            "config/runtime.yaml:5:10: `store.url` `mysql://db/keel` is not supported: the SQLite store is always `sqlite://.keel/keel.db`"
        ]
    );
    assert_eq!(
        runtime("    kind: sqlite\n    url: postgres://db/keel\n"),
        [
            "config/runtime.yaml:6:10: `store.url` `postgres://db/keel` is not supported: the SQLite store is always `sqlite://.keel/keel.db`"
        ]
    );
    assert_eq!(
        runtime("    kind: postgres\n    url: sqlite://.keel/keel.db\n"),
        ["config/runtime.yaml:6:10: `store.url` `sqlite://.keel/keel.db` is not a PostgreSQL URL"]
    );
    assert_eq!(
        runtime("    kind: postgres\n"),
        ["config/runtime.yaml:5:11: `store.kind: postgres` needs `store.url`"]
    );
    assert_eq!(
        runtime("    leaseTtl: 5s\n    artifacts: { kind: database }\n"),
        [
            "config/runtime.yaml:5:15: `store.leaseTtl` applies only to the PostgreSQL store",
            "config/runtime.yaml:6:24: `store.artifacts.kind: database` needs the PostgreSQL store"
        ]
    );
    assert_eq!(
        runtime("    url: postgres://db/keel\n    schema: Bad-Name\n"),
        [
            "config/runtime.yaml:6:13: `store.schema` must be lower-case letters, digits and `_` (at most 63, not starting with a digit)"
        ]
    );
    assert_eq!(
        runtime("    url: postgres://db/keel\n    mirror: perRun\n"),
        [
            "config/runtime.yaml:6:13: `store.mirror` applies only to the SQLite store (PostgreSQL keeps no JSONL mirror)"
        ]
    );
    // The kind follows the URL's scheme when it is left out.
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  store:\n    url: postgres://db/keel\n    schema: keel\n",
    );
    let loaded = ws.load_ok(&env(&[]));
    assert_eq!(
        loaded.runtime.store.backend(),
        keel_workspace::StoreKind::Postgres
    );
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  store:\n    url: sqlite://.keel/keel.db\n",
    );
    let loaded = ws.load_ok(&env(&[]));
    assert_eq!(loaded.runtime.store.url, keel_workspace::DEFAULT_STORE_URL);
    assert_eq!(
        loaded.runtime.store.backend(),
        keel_workspace::StoreKind::Sqlite
    );
}

#[test]
fn settings_of_another_provider_are_errors_at_their_keys() {
    let ws = workspace();
    ws.write(
        "config/models.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: offline }
spec:
  provider: scripted
  script: s.yaml
  baseUrl: http://127.0.0.1:1/v1
  params: { temperature: 0.2 }
---
apiVersion: keel/v1
kind: Model
metadata: { name: remote }
spec:
  provider: openai
  model: gpt-4o-mini
  script: s.yaml
",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/models.yaml:7:3: `baseUrl` has no effect on scripted model `offline`",
            "config/models.yaml:8:3: `params` has no effect on scripted model `offline`",
            "config/models.yaml:16:3: `script` has no effect on openai model `remote`",
        ]
    );
    assert_eq!(
        diagnostics[0].hint.as_deref(),
        Some("remove it; `baseUrl` applies to `openai` and `anthropic` models only")
    );
}

#[test]
fn anthropic_and_replay_settings_elsewhere_and_a_bad_currency_are_located() {
    let ws = workspace();
    ws.write(
        "config/models.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: remote }
spec:
  provider: openai
  model: gpt-4o-mini
  cache: auto
  params: { thinking: { budgetTokens: 2048 } }
  cassette: tests/a.json
  pricing: { inputPerMTok: 0.15, outputPerMTok: \"0.6\", currency: dollars }
---
apiVersion: keel/v1
kind: Model
metadata: { name: recorded }
spec:
  provider: replay
",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/models.yaml:7:3: `cache` has no effect on openai model `remote`",
            "config/models.yaml:8:13: `params.thinking` has no effect on openai model `remote`",
            "config/models.yaml:9:3: `cassette` has no effect on openai model `remote`",
            "config/models.yaml:10:66: `pricing.currency` \"dollars\" is not a currency code",
            "config/models.yaml:16:13: replay model `recorded` has no `cassette`",
        ]
    );
}

#[test]
fn a_runtime_context_needs_a_model_with_a_window() {
    let ws = workspace();
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  context: { compactAt: 0.7 }\n",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        ["config/runtime.yaml:4:3: `context` has no effect: no model declares `contextWindow`"]
    );
}

#[test]
fn an_agents_context_needs_its_models_window() {
    let ws = workspace();
    ws.write(
        "config/models.yaml",
        "\
apiVersion: keel/v1
kind: Model
metadata: { name: small }
spec: { provider: openai, model: m }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: reader }
spec:
  model: small
  context: { keepRecent: 2 }
",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/models.yaml:11:3: agent `reader` sets `context`, but its model `small` declares no `contextWindow`"
        ]
    );
}

#[test]
fn redaction_patterns_are_compiled_at_load_and_a_bad_one_is_located() {
    let ws = workspace();
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/runtime.yaml",
        "\
apiVersion: keel/v1
kind: Runtime
spec:
  redaction:
    patterns:
      - 'sk-[A-Za-z0-9]{8,}'
      - 'tok_(unclosed'
",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!((d.line, d.column), (7, 9));
    assert!(
        d.message
            .starts_with("`redaction.patterns[1]` is not a valid regex: "),
        "{}",
        d.message
    );
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  redaction: { patterns: ['sk-[A-Za-z0-9]{8,}'] }\n",
    );
    let loaded = ws.load_ok(&env(&[]));
    assert_eq!(loaded.runtime.redaction.patterns, ["sk-[A-Za-z0-9]{8,}"]);
}

#[test]
fn token_budgets_are_read_for_the_runtime_and_each_agent() {
    let ws = workspace();
    ws.write(
        "config/agent.yaml",
        format!("{MODEL_AND_AGENT}  limits: {{ maxTokens: 500 }}\n"),
    );
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  limits: { maxTokens: 0 }\n",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/runtime.yaml:4:24: `spec.limits.maxTokens` of Runtime `default` must be at least 1, found 0"
        ]
    );
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  limits: { maxTokens: 20000 }\n",
    );
    let loaded = ws.load_ok(&env(&[]));
    assert_eq!(loaded.runtime.limits.max_tokens, Some(20000));
    assert_eq!(loaded.agents["assistant"].limits.max_tokens, Some(500));
}

#[test]
fn a_workspace_without_an_agent_cannot_run() {
    let ws = workspace();
    let required = LoadOptions {
        require_agent: true,
        ..Default::default()
    };
    let diagnostics = ws.diagnostics(&required);
    assert_eq!(
        located(&diagnostics),
        ["config:1:1: the workspace defines no agent (nor workflow), so nothing can run"]
    );
    ws.write(
        "config/model.yaml",
        "# models only\napiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec: { provider: scripted, script: s.yaml }\n",
    );
    let diagnostics = ws.diagnostics(&required);
    assert_eq!(
        located(&diagnostics),
        [
            "config/model.yaml:2:1: the workspace defines no agent (nor workflow), so nothing can run"
        ]
    );
    assert!(
        diagnostics[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("kind: Agent")
    );
    // A partial workspace still loads for a program that asks for no agent.
    assert!(Workspace::load_with(ws.path(), &LoadOptions::default()).is_ok());
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    ws.load_ok(&required);
}

#[test]
fn invalid_utf8_is_reported_at_the_line_and_column_of_the_first_bad_byte() {
    let ws = workspace();
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    let mut bytes =
        b"apiVersion: keel/v1\nkind: Runtime\nspec:\n  server: { listen: \"h\xc3\xa9".to_vec();
    bytes.extend_from_slice(b"\xff\"}\n");
    ws.write("config/runtime.yaml", bytes);
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/runtime.yaml:4:24: invalid UTF-8: byte 0xff at byte offset 64 does not start a valid character"
        ]
    );
}

#[test]
fn on_error_deny_is_only_for_hooks_that_guard_a_call() {
    let ws = workspace();
    ws.write("config/agent.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/hooks.yaml",
        "\
apiVersion: keel/v1
kind: Hook
metadata: { name: audit }
spec:
  event: PostToolUse
  handler: { kind: command, command: [./check.sh] }
  onError: deny
---
apiVersion: keel/v1
kind: Hook
metadata: { name: guard }
spec:
  event: PreToolUse
  handler: { kind: command, command: [./check.sh] }
  onError: deny
",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        [
            "config/hooks.yaml:7:12: `onError: deny` of hook `audit` has no effect: its event `PostToolUse` guards no tool call"
        ]
    );
}
