//! `Policy` and `Hook` documents: loaded typed, hooks kept in declaration order (overlays
//! change a hook in place), and the references between tools, hooks, policies and agents
//! checked together.

use keel_workspace::{
    HookEvent, HookHandler, HookOnError, LoadOptions, PermissionMode, PolicyDecision,
};

use crate::support::{Load, MODEL_AND_AGENT, located, workspace};

fn hook(name: &str, event: &str, extra: &str) -> String {
    format!(
        "apiVersion: keel/v1\nkind: Hook\nmetadata: {{ name: {name} }}\nspec:\n  event: {event}\n  handler: {{ kind: command, command: [./audit.sh] }}\n{extra}"
    )
}

#[test]
fn policies_and_hooks_load_typed_with_hooks_in_declaration_order() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/policy.yaml",
        "\
apiVersion: keel/v1
kind: Policy
metadata: { name: default }
spec:
  agents: [assistant]
  mode: acceptEdits
  rules:
    - { tool: shell, args: { command: \"git status*\" }, decision: allow }
    - tool: shell
      args: { command: \"rm *\" }
      decision: deny
      reason: no deleting
",
    );
    // `b-hooks.yaml` sorts before `c-hooks.yaml`; within a file, the written order.
    ws.write(
        "config/c-hooks.yaml",
        hook("zz-last", "RunEnd", "  onError: fail-run\n"),
    );
    ws.write(
        "config/b-hooks.yaml",
        format!(
            "{}---\n{}",
            hook("second", "PreAbilityCall", "  matcher: \"^shell$\"\n"),
            hook("first", "Stop", "")
        ),
    );
    let loaded = ws.load_ok(&LoadOptions::default());

    let policy = &loaded.policies["default"];
    assert_eq!(policy.agents, ["assistant"]);
    assert_eq!(policy.mode, Some(PermissionMode::AcceptEdits));
    assert_eq!(policy.rules.len(), 2);
    assert_eq!(policy.rules[0].args["command"], "git status*");
    assert_eq!(policy.rules[1].decision, PolicyDecision::Deny);
    assert_eq!(policy.rules[1].reason.as_deref(), Some("no deleting"));

    let names: Vec<&str> = loaded.hooks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["second", "first", "zz-last"]);
    assert_eq!(loaded.hooks[0].1.event, HookEvent::PreToolUse, "alias");
    assert_eq!(loaded.hooks[0].1.matcher.as_deref(), Some("^shell$"));
    assert_eq!(loaded.hooks[1].1.event, HookEvent::SessionStop, "alias");
    assert_eq!(loaded.hooks[2].1.on_error, HookOnError::FailRun);
    assert!(matches!(
        &loaded.hooks[0].1.handler,
        HookHandler::Command { command, .. } if command == &["./audit.sh"]
    ));

    let paths: Vec<&str> = loaded.explain().iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"Policy/default.spec.mode"), "{paths:?}");
    assert!(paths.contains(&"Hook/first.spec.onError"), "{paths:?}");
}

#[test]
fn an_overlay_changes_a_hook_in_place_and_can_add_a_policy() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/hooks.yaml",
        format!(
            "{}---\n{}",
            hook("one", "PreToolUse", ""),
            hook("two", "PostToolUse", "")
        ),
    );
    let overlay = ws.write(
        "overlays/prod.yaml",
        "\
apiVersion: keel/v1
kind: Hook
metadata: { name: one }
spec: { onError: deny }
---
apiVersion: keel/v1
kind: Policy
metadata: { name: prod }
spec:
  mode: plan
",
    );
    let loaded = ws.load_ok(&LoadOptions {
        overlays: vec![overlay],
        ..Default::default()
    });
    let names: Vec<&str> = loaded.hooks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["one", "two"]);
    assert_eq!(loaded.hooks[0].1.on_error, HookOnError::Deny);
    assert_eq!(loaded.hooks[0].1.event, HookEvent::PreToolUse, "merged");
    assert_eq!(loaded.policies["prod"].mode, Some(PermissionMode::Plan));
}

#[test]
fn policy_and_hook_schema_errors_are_located() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        "\
apiVersion: keel/v1
kind: Policy
metadata: { name: p }
spec:
  rules:
    - { tool: shell, decision: maybe }
---
apiVersion: keel/v1
kind: Hook
metadata: { name: h }
spec:
  event: BeforeTool
  handler: { kind: command, command: [x] }
",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let located = located(&diagnostics);
    assert_eq!(located.len(), 2, "{located:#?}");
    assert!(
        located[0].starts_with("config/a.yaml:6:32: "),
        "{located:#?}"
    );
    assert!(located[0].contains("maybe"), "{located:#?}");
    assert!(
        located[1].starts_with("config/a.yaml:12:10: "),
        "{located:#?}"
    );
    assert!(located[1].contains("BeforeTool"), "{located:#?}");
}

#[test]
fn references_between_tools_hooks_policies_and_agents_are_checked_together() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/b.yaml",
        format!(
            "{}---\n{}---\n{}---\n{}",
            hook("audit", "PostToolUse", ""),
            hook("guard", "PreToolUse", "  matcher: \"(unclosed\"\n"),
            hook("greet", "RunStart", "  matcher: shell\n"),
            "\
apiVersion: keel/v1
kind: Tool
metadata: { name: deploy }
spec:
  description: Deploys.
  impl: { kind: command, command: [./deploy.sh] }
  policy: ask
  hooks:
    preCall: [audit, gard]
    postCall: [audit]
---
apiVersion: keel/v1
kind: Policy
metadata: { name: p }
spec:
  agents: [assistant, asistant]
"
        ),
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let lines: Vec<String> = diagnostics
        .iter()
        .map(|d| {
            format!(
                "{}\n  hint: {}",
                located(std::slice::from_ref(d))[0],
                d.hint.as_deref().unwrap_or("-")
            )
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
