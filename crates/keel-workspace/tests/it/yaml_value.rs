//! `parse_yaml_value` reads one YAML document with the loader's rules.

use std::path::Path;

use keel_workspace::parse_yaml_value;
use proptest::prelude::*;
use serde_json::json;

#[test]
fn one_document_becomes_json() {
    let value = parse_yaml_value(
        "steps:\n  - reply: \"hello\"\n  - tool: { name: read_file, args: { path: a.txt } }\n  - delay: 10\n    ok: yes\n",
        Path::new("script.yaml"),
    )
    .unwrap();
    assert_eq!(
        value,
        json!({"steps": [
            {"reply": "hello"},
            {"tool": {"name": "read_file", "args": {"path": "a.txt"}}},
            {"delay": 10, "ok": "yes"}
        ]})
    );
    assert_eq!(
        parse_yaml_value("", Path::new("e.yaml")).unwrap(),
        json!(null)
    );
}

#[test]
fn errors_name_the_file_and_position() {
    let err = parse_yaml_value("a: 1\nb: [\n", Path::new("scripts/s.yaml")).unwrap_err();
    assert_eq!(err.file, Path::new("scripts/s.yaml"));
    assert!(err.message.starts_with("invalid YAML"), "{}", err.message);

    let err = parse_yaml_value("a: 1\n---\nb: 2\n", Path::new("s.yaml")).unwrap_err();
    assert_eq!((err.line, err.column), (3, 1));
    assert_eq!(err.message, "expected one YAML document, found 2");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse_yaml_value(&text, Path::new("fuzz.yaml"));
    }

    #[test]
    fn yaml_like_text_never_panics(text in "[a-z:\\-\\[\\]{}&*!|>'\" \n,#%@`?~$0-9]{0,120}") {
        let _ = parse_yaml_value(&text, Path::new("fuzz.yaml"));
    }
}
