//! `keel store copy | check | migrate`: a workspace's SQLite history moved into PostgreSQL
//! (a fresh schema of the local database, dropped afterwards), then read through the same
//! commands with the workspace pointed at it.

use crate::common::{keel_in, quickstart};
use crate::replicas::{Schema, database_url};

fn psql(sql: &str) {
    let output = std::process::Command::new("psql")
        .arg(database_url())
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn a_sqlite_history_is_copied_into_postgres_and_read_back_from_it() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    for question in ["What is in this workspace?", "And what else?"] {
        let out = keel.run(["run", question]);
        assert!(out.success(), "{}", out.stderr);
    }
    let before = keel.json_lines(["runs", "list", "--json"]);
    assert_eq!(before.len(), 2);
    let first_id = before[1]["requestId"].as_str().unwrap().to_owned();
    let events_before = keel.json_lines(["runs", "events", &first_id, "--json"]);

    let schema = Schema::new();
    let url = database_url();
    let copy = [
        "store", "copy", "--from", "sqlite", "--to", "postgres", "--url", &url, "--schema",
        &schema.0,
    ];
    let out = keel.run(copy);
    assert!(out.success(), "{}", out.stderr);
    assert!(out.stdout.contains(" 2 runs ("), "{}", out.stdout);
    // Again: nothing is copied twice.
    let out = keel.run(copy);
    assert!(out.success(), "{}", out.stderr);
    assert!(out.stdout.contains(" 0 runs (0 events)"), "{}", out.stdout);
    let refused = keel.run(["store", "copy", "--from", "postgres", "--to", "sqlite"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);

    // The workspace now keeps its runs in PostgreSQL.
    let runtime = ws.path().join("config/runtime.yaml");
    let yaml = std::fs::read_to_string(&runtime).unwrap().replace(
        "spec:\n",
        &format!(
            "spec:\n  store: {{ kind: postgres, url: '{url}', schema: {} }}\n",
            schema.0
        ),
    );
    std::fs::write(&runtime, yaml).unwrap();
    let check = keel.run(["store", "check"]);
    assert!(check.success(), "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.starts_with("postgres postgres://"),
        "{}",
        check.stdout
    );
    assert!(
        check.stdout.contains("ok: reads and writes work"),
        "{}",
        check.stdout
    );
    let after = keel.json_lines(["runs", "list", "--json"]);
    assert_eq!(after, before, "the same runs, as they were");
    let events_after = keel.json_lines(["runs", "events", &first_id, "--json"]);
    assert_eq!(events_after, events_before, "the same events");
    let out = keel.run(["run", "One more on PostgreSQL"]);
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(keel.json_lines(["runs", "list", "--json"]).len(), 3);

    // A database migrated by a newer keel is refused, and left as it is.
    psql(&format!(
        "INSERT INTO {}.keel_schema (version, name) VALUES (99, 'future')",
        schema.0
    ));
    let check = keel.run(["store", "check"]);
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    assert!(
        check.stdout.contains("newer than this keel's"),
        "{}",
        check.stdout
    );
    let migrate = keel.run(["store", "migrate"]);
    assert_eq!(migrate.code, Some(1), "{}", migrate.stdout);
    assert!(
        migrate.stderr.contains("schema version 99"),
        "{}",
        migrate.stderr
    );
}
