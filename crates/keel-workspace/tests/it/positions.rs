//! Line and column numbers point at the exact node.

use keel_workspace::LoadOptions;

use crate::support::{Load, MODEL_AND_AGENT, workspace};

#[test]
fn unknown_field_points_at_the_key_with_one_based_line_and_column() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    //                     col: 123456789
    ws.write(
        "config/b.yaml",
        "# a comment\n\napiVersion: keel/v1\nkind: Agent\nmetadata: { name: b }\nspec:\n  model: default\n  limits:\n      maxSteps: 3\n      bogus: true\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    assert_eq!(d.file, std::path::PathBuf::from("config/b.yaml"));
    assert_eq!((d.line, d.column), (10, 7));
    assert_eq!(
        d.message,
        "unknown field `bogus` in `spec.limits` of Agent `b`"
    );
    assert_eq!(
        d.hint.as_deref(),
        Some("valid fields are `maxSteps`, `maxTokens`, `maxCost`, `runTimeout`")
    );
}

#[test]
fn a_bad_value_in_a_flow_list_points_at_the_item() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/b.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: b }\nspec: { model: default, tools: [grep, nope, list_dir] }\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    // `spec: { model: default, tools: [grep, ` is 38 characters.
    assert_eq!((d.line, d.column), (4, 39));
    assert_eq!(
        d.message,
        "agent `b` uses tool `nope` which is neither built in nor defined"
    );
}

#[test]
fn unknown_field_with_a_close_name_gets_a_suggestion() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/b.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: b }\nspec:\n  model: default\n  tool: [grep]\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    assert_eq!((d.line, d.column), (6, 3));
    assert_eq!(d.message, "unknown field `tool` in Agent `b`");
    assert_eq!(d.hint.as_deref(), Some("did you mean `tools`?"));
}

#[test]
fn a_syntax_error_is_reported_where_the_parser_stopped() {
    let ws = workspace();
    ws.write("config/a.yaml", "a: 1\nb: \"unterminated\n");
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(
        (
            diagnostics[0].line,
            diagnostics[0].column,
            diagnostics[0].message.as_str()
        ),
        (
            2,
            4,
            "invalid YAML: while scanning a quoted scalar, found unexpected end of stream"
        )
    );
}

#[test]
fn a_missing_nested_field_points_at_its_parent_key_and_typos_get_suggestions() {
    let ws = workspace();
    ws.write(
        "config/t.yaml",
        "apiVersion: keel/v1\nkind: Tool\nmetadata: { name: t }\nspec:\n  description: d\n  impl:\n    kind: command\n    comand: [x]\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    let rendered: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "config/t.yaml:6:3: error: missing field `command` in `spec.impl` of Tool `t`",
            "config/t.yaml:8:5: error: unknown field `comand` in `spec.impl` of Tool `t`\n  hint: did you mean `command`?",
        ]
    );
}

#[test]
fn a_value_the_schema_allows_but_the_type_cannot_hold_is_still_an_error() {
    let ws = workspace();
    ws.write(
        "config/r.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec:\n  limits: { maxSteps: 5000000000 }\n",
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    assert_eq!((d.line, d.column), (3, 1));
    assert!(
        d.message.starts_with("invalid spec of Runtime `default`: ") && d.message.contains("u32"),
        "{}",
        d.message
    );
}
