//! The tool list a model is shown: made once per inventory and shared while the tools stay the
//! same, made afresh when a source publishes.

use std::sync::Arc;

use keel_types::Tool;
use serde_json::json;

use super::{Recorder, gateway_of, inventory, tools};

#[test]
fn an_inventory_s_list_is_shared_until_the_tools_change() {
    let gateway = gateway_of(&tools());
    let listed = inventory();
    let first = gateway.specs(&listed);
    let names: Vec<&str> = first.iter().map(|spec| spec.name.as_str()).collect();
    assert_eq!(names, listed);
    assert!(Arc::ptr_eq(&first, &gateway.specs(&listed)));

    // Another inventory has its own list.
    let weather = gateway.specs(&["get_weather".to_owned()]);
    assert_eq!(weather.len(), 1);
    assert!(Arc::ptr_eq(&first, &gateway.specs(&listed)));

    // A source publishes: lists that name its tools show them, and the old list is not reused.
    let mut with_source = listed.clone();
    with_source.push("mcp__t__*".to_owned());
    assert_eq!(gateway.specs(&with_source).len(), listed.len());
    let published = Arc::new(Recorder::new("mcp__t__ping", json!({ "type": "object" })));
    let errors = gateway
        .catalog()
        .publish("mcp__t__", vec![published as Arc<dyn Tool>]);
    assert!(errors.is_empty(), "{errors:?}");
    let after = gateway.specs(&with_source);
    assert_eq!(after.len(), listed.len() + 1);
    assert_eq!(
        after.last().map(|spec| spec.name.as_str()),
        Some("mcp__t__ping")
    );
    assert!(!Arc::ptr_eq(&first, &gateway.specs(&listed)));
    assert_eq!(*first, *gateway.specs(&listed));
}
