//! The input schema of every built-in tool, as the model sees it: one snapshot per tool, so a
//! change to the model-facing contract is a reviewed diff. The schemas are generated from the
//! tools' input structs (`keel_tools::input`).

use keel_tools::builtin::builtins;
use keel_workspace::BuiltinToolSettings;

#[test]
fn every_builtin_input_schema() {
    for tool in builtins(&BuiltinToolSettings::default()) {
        let spec = tool.spec();
        insta::assert_json_snapshot!(format!("schema_{}", spec.name), spec.parameters);
    }
}
