//! The remote A2A echo agent does what its docstring promises, as the official Python client
//! (`a2a-sdk`'s `create_client`) sees it: its card, `echo` streamed in two appended chunks,
//! `fail`, an unknown message, `slow` working until `CancelTask` ends it (on the sending stream
//! and on a `SubscribeToTask` stream alike), and `--require-key` turning away calls without the
//! key; its call log records each call's method, task and headers.

use std::process::Command;

use keel_test_support::a2a_server::A2aEchoServer;
use keel_test_support::test_clients::a2a_python;
use serde_json::Value;

const KEY: &str = "sk-echo-test";

/// Drives the agent at `argv[1]` (bearer key `argv[2]`, or none when empty) through every
/// behaviour and prints one JSON line per step. The whole run is bounded, so a cancel that
/// never lands fails the test instead of hanging it.
const CLIENT: &str = r#"
import asyncio, json, sys
import httpx
from google.protobuf.json_format import MessageToDict
from a2a.client import ClientConfig, create_client
from a2a.types import (CancelTaskRequest, GetTaskRequest, Message, Part, Role,
                       SendMessageRequest, SubscribeToTaskRequest)

url, key = sys.argv[1], sys.argv[2]
headers = {"Authorization": f"Bearer {key}"} if key else {}
out = lambda value: print(json.dumps(value), flush=True)

def ask(text):
    return SendMessageRequest(message=Message(message_id=f"m-{text}", role=Role.ROLE_USER,
                                              parts=[Part(text=text)]))

async def client(streaming):
    http = httpx.AsyncClient(headers=headers, timeout=30)
    return await create_client(url, client_config=ClientConfig(streaming=streaming, httpx_client=http))

def state(event):
    if "task" in event:
        return event["task"]["status"]["state"]
    if "statusUpdate" in event:
        return event["statusUpdate"]["status"]["state"]
    return None

def summary(events):
    return [{"kind": next(iter(e)), "state": state(e), "artifact": e.get("artifactUpdate")}
            for e in events]

async def main():
    card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    out({"card": card})
    streaming, whole = await client(True), await client(False)

    echoed = [MessageToDict(e) async for e in streaming.send_message(ask("echo hi there"))]
    task_id = echoed[0]["task"]["id"]
    got = MessageToDict(await whole.get_task(GetTaskRequest(id=task_id)))
    out({"echo": summary(echoed), "got": got})

    failed = [MessageToDict(e) async for e in whole.send_message(ask("fail now"))]
    out({"fail": failed[0]["task"]})
    unknown = [MessageToDict(e) async for e in whole.send_message(ask("hello"))]
    out({"unknown": unknown[0]["task"]})

    # slow: read the sending stream up to `working`, subscribe too, then cancel.
    sent = streaming.send_message(ask("slow down"))
    seen = []
    async for event in sent:
        seen.append(MessageToDict(event))
        if state(seen[-1]) == "TASK_STATE_WORKING":
            break
    slow_id = seen[0]["task"]["id"]
    subscription = streaming.subscribe(SubscribeToTaskRequest(id=slow_id))
    subscribed = [MessageToDict(await anext(subscription))]
    cancelled = MessageToDict(await whole.cancel_task(CancelTaskRequest(id=slow_id)))
    seen += [MessageToDict(e) async for e in sent]
    subscribed += [MessageToDict(e) async for e in subscription]
    after = MessageToDict(await whole.get_task(GetTaskRequest(id=slow_id)))
    try:
        await whole.cancel_task(CancelTaskRequest(id=slow_id))
        again = "cancelled twice"
    except Exception as error:
        again = type(error).__name__
    out({"slow": summary(seen), "subscribed": summary(subscribed), "cancelled": cancelled,
         "after": after["status"]["state"], "again": again, "id": slow_id})

async def keyed():
    echoed = [MessageToDict(e) async for e in (await client(True)).send_message(ask("echo keyed"))]
    out({"keyed": summary(echoed)})
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    version = {"A2A-Version": "1.0"}
    out({"wrong": httpx.post(url, json=rpc, headers={**version, "Authorization": "Bearer sk-wrong"}).status_code,
         "none": httpx.post(url, json=rpc, headers=version).status_code,
         "card": httpx.get(f"{url}/.well-known/agent-card.json").status_code})

asyncio.run(asyncio.wait_for(keyed() if key else main(), 60))
"#;

/// Runs [`CLIENT`] against `server` and returns its lines.
fn drive(server: &A2aEchoServer, key: &str) -> Vec<Value> {
    let output = Command::new(a2a_python())
        .args(["-c", CLIENT, server.url(), key])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed: {stdout}\n{}\nthe server's stderr:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.stderr()
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// The `(kind, state)` pairs of a [`CLIENT`] event summary.
fn kinds_and_states(events: &Value) -> Vec<(String, String)> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let state = e["state"].as_str().unwrap_or("-");
            (e["kind"].as_str().unwrap().to_owned(), state.to_owned())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(kind, state)| ((*kind).to_owned(), (*state).to_owned()))
        .collect()
}

#[test]
fn the_echo_agent_echoes_fails_and_stays_working_until_cancelled() {
    let server = A2aEchoServer::start(&[]);
    let lines = drive(&server, "");

    let card = &lines[0]["card"];
    assert_eq!(card["supportedInterfaces"][0]["url"], server.url());
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);

    // echo: working, the answer in two chunks (the second appended), completed.
    let echo = &lines[1]["echo"];
    assert_eq!(
        kinds_and_states(echo),
        pairs(&[
            ("task", "TASK_STATE_SUBMITTED"),
            ("statusUpdate", "TASK_STATE_WORKING"),
            ("artifactUpdate", "-"),
            ("artifactUpdate", "-"),
            ("statusUpdate", "TASK_STATE_COMPLETED"),
        ]),
        "{echo}"
    );
    let (first, second) = (&echo[2]["artifact"], &echo[3]["artifact"]);
    assert_eq!(first["artifact"]["name"], "answer");
    assert_eq!(first["artifact"]["parts"][0]["text"], "echo: ");
    assert_eq!(first.get("append"), None, "{first}");
    assert_eq!(second["artifact"]["parts"][0]["text"], "hi there");
    assert_eq!(second["append"], true);
    assert_eq!(second["lastChunk"], true);
    assert_eq!(
        first["artifact"]["artifactId"],
        second["artifact"]["artifactId"]
    );
    let got = &lines[1]["got"];
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    let parts: Vec<&str> = got["artifacts"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(parts.concat(), "echo: hi there", "{got}");

    let failed = &lines[2]["fail"];
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    assert_eq!(failed["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(
        failed["status"]["message"]["parts"][0]["text"],
        "the remote agent failed on purpose"
    );
    let unknown = &lines[3]["unknown"];
    assert_eq!(unknown["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(unknown["artifacts"][0]["name"], "answer");
    assert_eq!(
        unknown["artifacts"][0]["parts"][0]["text"],
        "unknown: hello"
    );

    // slow: working until CancelTask; both streams then end canceled.
    let slow = &lines[4];
    assert_eq!(
        kinds_and_states(&slow["slow"]),
        pairs(&[
            ("task", "TASK_STATE_SUBMITTED"),
            ("statusUpdate", "TASK_STATE_WORKING"),
            ("statusUpdate", "TASK_STATE_CANCELED"),
        ]),
        "{slow}"
    );
    assert_eq!(
        kinds_and_states(&slow["subscribed"]),
        pairs(&[
            ("task", "TASK_STATE_WORKING"),
            ("statusUpdate", "TASK_STATE_CANCELED"),
        ]),
        "{slow}"
    );
    assert_eq!(slow["cancelled"]["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(
        slow["cancelled"]["status"]["message"]["parts"][0]["text"],
        "cancelled"
    );
    assert_eq!(slow["after"], "TASK_STATE_CANCELED");
    assert_eq!(slow["again"], "TaskNotCancelableError", "{slow}");

    // The call log: every call in order, what it named, the headers the client sent.
    let echo_id = got["id"].as_str().unwrap();
    let slow_id = slow["id"].as_str().unwrap();
    let log = server.log_lines();
    let calls: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|l| {
            let named = l.get("id").or_else(|| l.get("text"));
            (l["method"].as_str().unwrap(), named.and_then(Value::as_str))
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("SendStreamingMessage", Some("echo hi there")),
            ("GetTask", Some(echo_id)),
            ("SendMessage", Some("fail now")),
            ("SendMessage", Some("hello")),
            ("SendStreamingMessage", Some("slow down")),
            ("SubscribeToTask", Some(slow_id)),
            ("CancelTask", Some(slow_id)),
            ("GetTask", Some(slow_id)),
            ("CancelTask", Some(slow_id)),
        ],
        "{log:?}"
    );
    for line in &log {
        assert_eq!(line["headers"]["a2a-version"], "1.0", "{line}");
        assert_eq!(line["headers"]["authorization"], Value::Null, "{line}");
        assert_eq!(line["authorized"], true, "{line}");
    }
    assert_eq!(log[0]["taskId"], Value::Null, "a new task names none");
    assert_eq!(server.calls_of("CancelTask").len(), 2);
}

#[test]
fn a_required_key_turns_away_calls_without_it() {
    let server = A2aEchoServer::start(&["--require-key", KEY]);
    let lines = drive(&server, KEY);

    assert_eq!(
        kinds_and_states(&lines[0]["keyed"]).last().unwrap().1,
        "TASK_STATE_COMPLETED",
        "{}",
        lines[0]
    );
    assert_eq!(lines[1]["wrong"], 401);
    assert_eq!(lines[1]["none"], 401);
    assert_eq!(lines[1]["card"], 200, "the card stays public");

    let log = server.log_lines();
    let seen: Vec<(&Value, &Value)> = log
        .iter()
        .map(|l| (&l["headers"]["authorization"], &l["authorized"]))
        .collect();
    let bearer = Value::from(format!("Bearer {KEY}"));
    let (wrong, yes, no) = (
        Value::from("Bearer sk-wrong"),
        Value::Bool(true),
        Value::Bool(false),
    );
    assert_eq!(
        seen,
        [(&bearer, &yes), (&wrong, &no), (&Value::Null, &no)],
        "{log:?}"
    );
}
