//! `keel usage`: runs summed by agent (or day, session, key) from the store, their cost
//! exact at the declared prices, matching the runs' own records.

use keel_test_support::WorkspaceBuilder;
use serde_json::{Value, json};

use crate::common::keel_in;

#[test]
fn usage_by_agent_sums_each_runs_record_exactly() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .priced_scripted_model("m", (1234, 56), "{ inputPerMTok: 3, outputPerMTok: 15 }")
        .agent("a", "{ model: m }")
        .agent("b", "{ model: m }")
        .build();
    let keel = keel_in(&ws);
    for agent in ["a", "a", "b"] {
        let run = keel.run(["run", "--agent", agent, "Hi"]);
        assert!(run.success(), "{}", run.stderr);
    }

    let rows = keel.json_lines(["usage", "--json"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["group"], "a");
    assert_eq!(rows[0]["runs"], 2);
    assert_eq!(rows[0]["usage"]["promptTokens"], 2468);
    // 1234 × 3 + 56 × 15 per million, twice.
    assert_eq!(
        rows[0]["usage"]["cost"],
        json!({"amount": "0.009084", "currency": "USD"})
    );
    assert_eq!(rows[1]["group"], "b");
    assert_eq!(rows[1]["usage"]["cost"]["amount"], "0.004542");

    // The same sums as the runs' own records.
    let records = keel.json_lines(["runs", "list", "--json"]);
    let of = |agent: &str| -> u64 {
        records
            .iter()
            .filter(|r| r["agent"] == agent)
            .map(|r| r["usage"]["promptTokens"].as_u64().unwrap())
            .sum()
    };
    assert_eq!((of("a"), of("b")), (2468, 1234));

    let days = keel.json_lines(["usage", "--by", "day", "--json"]);
    assert_eq!(days.len(), 1);
    assert_eq!(days[0]["runs"], 3);
    let table = keel.run(["usage"]);
    assert!(table.success(), "{}", table.stderr);
    assert!(table.stdout.contains("0.009084 USD"), "{}", table.stdout);
    let wrong = keel.run(["usage", "--by", "planet"]);
    assert_eq!(wrong.code, Some(2), "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains("agent, session, key or day"),
        "{}",
        wrong.stderr
    );
    let recent: Vec<Value> = keel.json_lines(["usage", "--since", "1h", "--json"]);
    assert_eq!(recent.len(), 2, "every run started within the hour");
    let future: Vec<Value> =
        keel.json_lines(["usage", "--since", "2999-01-01T00:00:00Z", "--json"]);
    assert!(future.is_empty(), "{future:?}");
}
