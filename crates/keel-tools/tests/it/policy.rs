//! The policy engine: a table of (policies, tool policy, mode, call) → (decision, source),
//! the "a subagent cannot widen its parent's policy" property of narrowing layers, and the
//! engine built from a loaded workspace.

use keel_test_support::WorkspaceBuilder;
use keel_tools::policy::{PolicyEngine, PolicyQuery, PolicyVerdict};
use keel_workspace::{PermissionMode, PolicyDecision, PolicySpec, Workspace};
use serde_json::{Value, json};

use PermissionMode::{AcceptEdits, DontAsk, Plan};
use PolicyDecision::{Allow, Ask, Deny};

/// A `Policy` spec from its JSON form (the same shape as the YAML).
fn spec(value: Value) -> PolicySpec {
    serde_json::from_value(value).unwrap()
}

const GIT_STATUS_ALLOW: &str =
    r#"{"tool":"shell","args":{"command":"git status*"},"decision":"allow"}"#;
const RM_DENY: &str =
    r#"{"tool":"shell","args":{"command":"rm *"},"decision":"deny","reason":"no deleting"}"#;

/// One row of the table.
struct Row {
    name: &'static str,
    /// `Policy` documents as `(name, spec JSON)`, in declaration order.
    policies: Vec<(&'static str, Value)>,
    /// Tools' own `policy:`.
    tool_policies: Vec<(&'static str, PolicyDecision)>,
    mode: Option<PermissionMode>,
    agent: &'static str,
    tool: &'static str,
    args: Value,
    read_only: bool,
    decision: PolicyDecision,
    source: &'static str,
}

fn rules(rules: &[&str]) -> Value {
    let rules: Vec<Value> = rules
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    json!({ "rules": rules })
}

fn row(name: &'static str) -> Row {
    Row {
        name,
        policies: Vec::new(),
        tool_policies: Vec::new(),
        mode: None,
        agent: "assistant",
        tool: "shell",
        args: json!({}),
        read_only: false,
        decision: Ask,
        source: "default",
    }
}

fn table() -> Vec<Row> {
    let shell_rules = || vec![("default", rules(&[GIT_STATUS_ALLOW, RM_DENY]))];
    vec![
        Row {
            policies: shell_rules(),
            args: json!({"command": "git status --short"}),
            decision: Allow,
            source: "Policy/default rules[0]",
            ..row("git status is allowed")
        },
        Row {
            policies: shell_rules(),
            args: json!({"command": "rm -rf build"}),
            decision: Deny,
            source: "Policy/default rules[1]",
            ..row("rm is denied")
        },
        Row {
            policies: vec![(
                "default",
                rules(&[
                    r#"{"tool":"shell","args":{"command":"*"},"decision":"allow"}"#,
                    RM_DENY,
                ]),
            )],
            args: json!({"command": "rm -rf build"}),
            decision: Deny,
            source: "Policy/default rules[1]",
            ..row("both match: the strictest wins")
        },
        Row {
            policies: shell_rules(),
            args: json!({"command": "cargo build"}),
            ..row("unmatched shell asks by default")
        },
        Row {
            policies: shell_rules(),
            args: json!({}),
            ..row("a missing argument does not match")
        },
        Row {
            tool: "read_file",
            args: json!({"path": "a.txt"}),
            read_only: true,
            decision: Allow,
            source: "default (read-only tool)",
            ..row("read_file is allowed by default")
        },
        Row {
            tool: "write_file",
            args: json!({"path": "a.txt"}),
            ..row("write_file asks by default")
        },
        Row {
            tool: "write_file",
            mode: Some(Plan),
            decision: Deny,
            source: "permission mode plan",
            ..row("plan mode denies write_file")
        },
        Row {
            policies: vec![("default", rules(&[r#"{"tool":"*","decision":"allow"}"#]))],
            mode: Some(Plan),
            decision: Deny,
            source: "permission mode plan",
            ..row("plan mode denies even an allowed side-effecting tool")
        },
        Row {
            tool: "grep",
            read_only: true,
            mode: Some(Plan),
            decision: Allow,
            source: "default (read-only tool)",
            ..row("plan mode still allows read-only tools")
        },
        Row {
            mode: Some(DontAsk),
            decision: Deny,
            source: "permission mode dontAsk",
            ..row("dontAsk turns ask into deny")
        },
        Row {
            policies: shell_rules(),
            args: json!({"command": "git status"}),
            mode: Some(DontAsk),
            decision: Allow,
            source: "Policy/default rules[0]",
            ..row("dontAsk leaves allow alone")
        },
        Row {
            tool: "write_file",
            mode: Some(AcceptEdits),
            decision: Allow,
            source: "permission mode acceptEdits",
            ..row("acceptEdits allows write_file")
        },
        Row {
            tool: "edit_file",
            mode: Some(AcceptEdits),
            decision: Allow,
            source: "permission mode acceptEdits",
            ..row("acceptEdits allows edit_file")
        },
        Row {
            mode: Some(AcceptEdits),
            ..row("acceptEdits does not allow shell")
        },
        Row {
            tool: "write_file",
            policies: vec![(
                "default",
                rules(&[r#"{"tool":"write_file","decision":"deny"}"#]),
            )],
            mode: Some(AcceptEdits),
            decision: Deny,
            source: "Policy/default rules[0]",
            ..row("acceptEdits does not override a deny")
        },
        Row {
            tool: "deploy",
            policies: vec![(
                "default",
                rules(&[r#"{"tool":"deploy","decision":"allow"}"#]),
            )],
            tool_policies: vec![("deploy", Deny)],
            decision: Deny,
            source: "Tool/deploy policy",
            ..row("a tool-level deny beats a Policy allow")
        },
        Row {
            tool: "deploy",
            tool_policies: vec![("deploy", Allow)],
            decision: Allow,
            source: "Tool/deploy policy",
            ..row("a tool-level allow decides when no Policy rule matches")
        },
        Row {
            tool: "deploy",
            policies: vec![(
                "default",
                rules(&[r#"{"tool":"dep*","decision":"ask","reason":"prod"}"#]),
            )],
            tool_policies: vec![("deploy", Ask)],
            source: "Policy/default rules[0]",
            ..row("a tie goes to the first in declaration order")
        },
        Row {
            policies: vec![(
                "ops",
                json!({"agents": ["ops"], "rules": [{"tool": "shell", "decision": "allow"}]}),
            )],
            agent: "assistant",
            ..row("a policy for other agents does not apply")
        },
        Row {
            policies: vec![(
                "ops",
                json!({"agents": ["ops"], "rules": [{"tool": "shell", "decision": "allow"}]}),
            )],
            agent: "ops",
            decision: Allow,
            source: "Policy/ops rules[0]",
            ..row("a policy for this agent applies")
        },
        Row {
            policies: vec![
                ("a", rules(&[r#"{"tool":"shell","decision":"allow"}"#])),
                ("b", rules(&[r#"{"tool":"sh*","decision":"ask"}"#])),
            ],
            source: "Policy/b rules[0]",
            ..row("the strictest wins across policies")
        },
        Row {
            tool: "mcp__github__search",
            policies: vec![(
                "default",
                rules(&[r#"{"tool":"mcp__github__*","decision":"allow"}"#]),
            )],
            decision: Allow,
            source: "Policy/default rules[0]",
            ..row("tool globs match mcp tools")
        },
        Row {
            tool: "http_fetch",
            policies: vec![(
                "default",
                rules(&[
                    r#"{"tool":"http_fetch","args":{"url":"https://docs.rs/*","method":"GET"},"decision":"allow"}"#,
                ]),
            )],
            args: json!({"url": "https://docs.rs/regex", "method": "GET"}),
            decision: Allow,
            source: "Policy/default rules[0]",
            ..row("every args glob must match")
        },
        Row {
            tool: "http_fetch",
            policies: vec![(
                "default",
                rules(&[
                    r#"{"tool":"http_fetch","args":{"url":"https://docs.rs/*","method":"GET"},"decision":"allow"}"#,
                ]),
            )],
            args: json!({"url": "https://docs.rs/regex", "method": "POST"}),
            ..row("one args glob not matching fails the rule")
        },
        Row {
            tool: "deploy",
            policies: vec![(
                "default",
                rules(&[r#"{"tool":"deploy","args":{"replicas":"1?"},"decision":"deny"}"#]),
            )],
            args: json!({"replicas": 12}),
            decision: Deny,
            source: "Policy/default rules[0]",
            ..row("non-string arguments match as their JSON text")
        },
        Row {
            policies: vec![("default", json!({"mode": "plan"}))],
            decision: Deny,
            source: "permission mode plan",
            ..row("without a run mode, a policy's mode applies")
        },
        Row {
            policies: vec![
                ("a", json!({"mode": "acceptEdits"})),
                ("b", json!({"mode": "dontAsk"})),
            ],
            tool: "write_file",
            decision: Deny,
            source: "permission mode dontAsk",
            ..row("the strictest policy mode applies")
        },
        Row {
            policies: vec![("default", json!({"mode": "plan"}))],
            tool: "write_file",
            mode: Some(AcceptEdits),
            decision: Allow,
            source: "permission mode acceptEdits",
            ..row("the run's mode wins over the policies' mode")
        },
    ]
}

fn decide(row: &Row, narrowing: &[&PolicySpec]) -> PolicyVerdict {
    let engine = PolicyEngine::new(
        row.policies
            .iter()
            .map(|(name, value)| ((*name).to_owned(), spec(value.clone()))),
        row.tool_policies
            .iter()
            .map(|(name, decision)| ((*name).to_owned(), *decision)),
    );
    engine.decide(
        &PolicyQuery {
            agent: row.agent,
            tool: row.tool,
            args: &row.args,
            read_only: row.read_only,
            mode: row.mode,
        },
        narrowing,
    )
}

#[test]
fn policy_table() {
    let table = table();
    assert!(table.len() >= 20);
    let mut failures = Vec::new();
    for row in &table {
        let verdict = decide(row, &[]);
        if (verdict.decision, verdict.source.as_str()) != (row.decision, row.source) {
            failures.push(format!(
                "{}: expected {:?} from `{}`, got {:?} from `{}`",
                row.name, row.decision, row.source, verdict.decision, verdict.source
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_deciding_rule_reason_is_returned() {
    let row = Row {
        policies: vec![("default", rules(&[GIT_STATUS_ALLOW, RM_DENY]))],
        args: json!({"command": "rm -rf /"}),
        ..row("reason")
    };
    let verdict = decide(&row, &[]);
    assert_eq!(verdict.reason.as_deref(), Some("no deleting"));
}

#[test]
fn a_subagent_cannot_widen_its_parents_policy() {
    // The parent's policy says ask (by default); the subagent's layer says allow.
    let base = row("narrowing");
    let layer = spec(json!({"rules": [{"tool": "*", "decision": "allow"}]}));
    let verdict = decide(&base, &[&layer]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Ask, "default")
    );

    // Nor can a layer's acceptEdits mode widen an ask.
    let edit = Row {
        tool: "write_file",
        ..row("narrowing")
    };
    let layer = spec(json!({"mode": "acceptEdits"}));
    assert_eq!(decide(&edit, &[&layer]).decision, Ask);
}

#[test]
fn narrowing_layers_can_make_a_decision_stricter() {
    let allowed = Row {
        policies: vec![("default", rules(&[GIT_STATUS_ALLOW]))],
        args: json!({"command": "git status"}),
        ..row("narrowing")
    };
    assert_eq!(decide(&allowed, &[]).decision, Allow);

    let ask_layer = spec(json!({"rules": [{"tool": "shell", "decision": "ask"}]}));
    let verdict = decide(&allowed, &[&ask_layer]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Ask, "narrowing[0] rules[0]")
    );

    let deny_layer = spec(json!({"rules": [{"tool": "sh*", "decision": "deny", "reason": "sub"}]}));
    let verdict = decide(&allowed, &[&ask_layer, &deny_layer]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Deny, "narrowing[1] rules[0]")
    );
    assert_eq!(verdict.reason.as_deref(), Some("sub"));

    let silent_layer = spec(json!({"rules": [{"tool": "read_file", "decision": "deny"}]}));
    assert_eq!(
        decide(&allowed, &[&silent_layer]).decision,
        Allow,
        "no match leaves the base"
    );

    let plan_layer = spec(json!({"mode": "plan"}));
    let verdict = decide(&allowed, &[&plan_layer]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Deny, "permission mode plan")
    );

    // The run's dontAsk also covers an ask a layer added.
    let dont_ask = Row {
        mode: Some(DontAsk),
        ..allowed
    };
    assert_eq!(decide(&dont_ask, &[&ask_layer]).decision, Deny);
}

#[test]
fn the_engine_reads_a_loaded_workspace() {
    let ws = WorkspaceBuilder::new()
        .tool(
            "deploy",
            "
            description: Deploys.
            impl: { kind: command, command: [./deploy.sh] }
            policy: deny
            ",
        )
        .policy(
            "default",
            r#"
            rules:
              - { tool: shell, args: { command: "git status*" }, decision: allow }
              - { tool: "*", decision: allow }
            "#,
        )
        .build();
    let workspace = Workspace::load_with(ws.path(), &Default::default()).unwrap();
    let engine = PolicyEngine::from_workspace(&workspace);
    let query = |tool: &'static str, args: &'static Value| PolicyQuery {
        agent: "assistant",
        tool,
        args,
        read_only: false,
        mode: None,
    };
    static STATUS: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| json!({"command": "git status"}));
    let verdict = engine.decide(&query("shell", &STATUS), &[]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Allow, "Policy/default rules[0]")
    );
    let verdict = engine.decide(&query("deploy", &STATUS), &[]);
    assert_eq!(
        (verdict.decision, verdict.source.as_str()),
        (Deny, "Tool/deploy policy")
    );
}
