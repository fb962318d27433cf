//! The official A2A clients against `keel serve`'s A2A agents: the Python `a2a-sdk` resolves
//! an agent's card, sends (whole and streamed), gets and cancels tasks, with and without API
//! keys; a task whose tool call needs a human goes `TASK_STATE_INPUT_REQUIRED` and completes
//! after an `approve` sent to the task; the JavaScript SDK (`@a2a-js/sdk`) talks to Keel too.

use std::process::Command;

use keel_test_support::test_clients::{a2a_python, protocol_clients_js};
use keel_test_support::{MockLlm, Serving, TempWorkspace};
use serde_json::Value;

use crate::common::{json_lines, keel_in, tool_round_workspace};

const KEY: &str = "sk-keel-a2a-client";

/// `assistant` reads its README; `guarded` calls `record`, which policy sends for approval.
fn workspace(mock: &MockLlm, keys: bool) -> TempWorkspace {
    let runtime = match keys {
        true => {
            "{ defaultAgent: assistant, server: { apiKeys: [ { env: A2A_CLIENT_KEY, role: client } ] } }"
        }
        false => "{ defaultAgent: assistant }",
    };
    tool_round_workspace(mock, runtime, "Answers from the workspace's README.").build()
}

const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
import httpx
from google.protobuf.json_format import MessageToDict
from a2a.client import ClientConfig, create_client
from a2a.types import (Message, Part, Role, SendMessageRequest, GetTaskRequest,
                       CancelTaskRequest, SubscribeToTaskRequest)

base, key = sys.argv[1], sys.argv[2]
headers = {"Authorization": f"Bearer {key}"} if key else {}
out = lambda value: print(json.dumps(value), flush=True)
as_dict = lambda message: MessageToDict(message)

def message(text, context=None, task=None):
    m = Message(message_id=f"m-{text[:12]}-{task}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if context: m.context_id = context
    if task: m.task_id = task
    return SendMessageRequest(message=m)

async def client(agent, streaming):
    http = httpx.AsyncClient(headers=headers, timeout=60)
    return await create_client(f"{base}/a2a/{agent}", client_config=ClientConfig(streaming=streaming, httpx_client=http))

async def events(client, request):
    seen = []
    async for response in client.send_message(request):
        seen.append(as_dict(response))
    return seen

def kinds(seen):
    return [next(iter(e)) for e in seen]

def last_task_state(seen):
    states = [e["statusUpdate"]["status"]["state"] if "statusUpdate" in e else e["task"]["status"]["state"]
              for e in seen if "statusUpdate" in e or "task" in e]
    return states[-1] if states else None

async def main():
    card = httpx.get(f"{base}/a2a/assistant/.well-known/agent-card.json").json()
    root = httpx.get(f"{base}/.well-known/agent-card.json").json()
    out({"card": card, "root": root["name"]})

    whole = await client("assistant", False)
    sent = await events(whole, message("What does the README say?"))
    task = sent[0]["task"]
    out({"whole": task})
    got = as_dict(await whole.get_task(GetTaskRequest(id=task["id"])))
    out({"got": got})

    streamed = await client("assistant", True)
    seen = await events(streamed, message("And again?", context=task["contextId"]))
    out({"stream": kinds(seen), "state": last_task_state(seen),
         "context": [e.get("statusUpdate", e.get("task", e.get("artifactUpdate", {}))).get("contextId") for e in seen],
         "answer": [p["text"] for e in seen if "artifactUpdate" in e for p in e["artifactUpdate"]["artifact"]["parts"]]})

    guarded = await client("guarded", True)
    seen = await events(guarded, message("Record two."))
    asked = [e for e in seen if "statusUpdate" in e][-1]["statusUpdate"]
    out({"asked": asked, "kinds": kinds(seen)})
    seen = await events(guarded, message("approve it", task=asked["taskId"]))
    out({"approved": kinds(seen), "state": last_task_state(seen),
         "answer": [p["text"] for e in seen if "artifactUpdate" in e for p in e["artifactUpdate"]["artifact"]["parts"]]})

    blocking = await client("guarded", False)
    waiting = (await events(blocking, message("Record two.")))[0]["task"]
    cancelled = as_dict(await blocking.cancel_task(CancelTaskRequest(id=waiting["id"])))
    out({"waiting": waiting["status"]["state"], "cancelled": cancelled["status"]["state"]})

    try:
        await whole.get_task(GetTaskRequest(id="req_nope"))
        out({"missing": "found"})
    except Exception as error:
        out({"missing": type(error).__name__, "message": str(error)})
    try:
        async for _ in whole.subscribe(SubscribeToTaskRequest(id=task["id"])):
            pass
        out({"subscribe": "streamed"})
    except Exception as error:
        out({"subscribe": type(error).__name__})
    if key:
        wrong = httpx.post(f"{base}/a2a/assistant", headers={"Authorization": "Bearer sk-wrong"},
                           json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}})
        out({"wrong_key": wrong.status_code})

asyncio.run(main())
"#;

const NODE_CLIENT: &str = r#"
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = require("@a2a-js/sdk/client");
const { Role, TaskState } = require("@a2a-js/sdk");
const [base, key] = process.argv.slice(-2);
const out = (value) => console.log(JSON.stringify(value));
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};
const message = (text, contextId = "") => ({
  messageId: `m-${text.length}-${contextId}`, contextId, taskId: "", role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const ask = (text, contextId) => ({ tenant: "", message: message(text, contextId), configuration: undefined, metadata: undefined });
(async () => {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  }));
  const client = await factory.createFromUrl(`${base}/a2a/assistant/`);
  const task = await client.sendMessage(ask("What does the README say?"));
  out({ kind: "id" in task && "status" in task ? "task" : "message", state: TaskState[task.status.state],
        answer: task.artifacts[0].parts[0].content.value });
  const kinds = [];
  let state;
  for await (const event of client.sendMessageStream(ask("And again?", task.contextId))) {
    kinds.push(event.payload.$case);
    if (event.payload.$case === "statusUpdate") state = TaskState[event.payload.value.status.state];
  }
  out({ kinds, state });
  const got = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
  out({ got: TaskState[got.status.state], context: got.contextId === task.contextId });
  try { await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }); out({ cancel: "cancelled" }); }
  catch (error) { out({ cancel: error.constructor.name }); }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

fn serve(dir: &TempWorkspace) -> Serving {
    keel_in(dir).env("A2A_CLIENT_KEY", KEY).serve()
}

const ANSWER: &str = "The tool said: hello from the workspace";

async fn python_client_drives_keel(keys: bool) {
    let python = tokio::task::block_in_place(a2a_python);
    let mock = MockLlm::start().await;
    let dir = workspace(&mock, keys);
    let server = serve(&dir);
    let base = format!("http://{}", server.addr());
    let key = if keys { KEY } else { "" };
    let output = tokio::task::block_in_place(|| {
        Command::new(python)
            .args(["-c", PYTHON_CLIENT, &base, key])
            .output()
            .unwrap()
    });
    let lines = json_lines(&output);

    let card = &lines[0]["card"];
    assert_eq!(card["name"], "assistant");
    assert_eq!(card["description"], "Answers from the workspace's README.");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{base}/a2a/assistant")
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][1]["name"], "read_file");
    assert_eq!(card.get("securitySchemes").is_some(), keys, "{card}");
    assert_eq!(lines[0]["root"], "assistant");

    // SendMessage: the task has ended when it answers; its artifact is the answer.
    let whole = &lines[1]["whole"];
    assert_eq!(whole["status"]["state"], "TASK_STATE_COMPLETED", "{whole}");
    assert_eq!(whole["artifacts"][0]["parts"][0]["text"], ANSWER);
    assert!(!whole["id"].as_str().unwrap().is_empty());
    let context = whole["contextId"].as_str().unwrap();
    assert_eq!(lines[2]["got"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        lines[2]["got"]["history"][0]["parts"][0]["text"],
        "What does the README say?"
    );

    // SendStreamingMessage in the same context: a turn of the same session.
    let streamed = &lines[3];
    assert_eq!(streamed["stream"][0], "task");
    assert_eq!(
        streamed["stream"].as_array().unwrap().last().unwrap(),
        "statusUpdate"
    );
    assert_eq!(streamed["state"], "TASK_STATE_COMPLETED");
    assert_eq!(streamed["answer"][0], ANSWER);
    assert!(
        streamed["context"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c == context),
        "{streamed}"
    );
    let second_turn = mock
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.to_string().contains("And again?"))
        .unwrap();
    assert!(
        second_turn
            .body
            .to_string()
            .contains("What does the README say?"),
        "the second turn carries the first"
    );

    // A call needing a human: input-required, then approved through A2A.
    let asked = &lines[4]["asked"];
    assert_eq!(
        asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let question = &asked["status"]["message"];
    assert_eq!(question["parts"][1]["data"]["tool"], "record");
    assert_eq!(lines[5]["state"], "TASK_STATE_COMPLETED", "{}", lines[5]);
    assert_eq!(lines[5]["answer"][0], "The tool said: recorded");

    // A blocking send answers when the task needs a human; cancelling it ends it.
    assert_eq!(lines[6]["waiting"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(lines[6]["cancelled"], "TASK_STATE_CANCELED");

    assert_eq!(lines[7]["missing"], "TaskNotFoundError", "{}", lines[7]);
    assert_ne!(
        lines[8]["subscribe"], "streamed",
        "an ended task cannot be subscribed to"
    );
    if keys {
        assert_eq!(lines[9]["wrong_key"], 401);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_sends_streams_gets_and_cancels_tasks_with_keys() {
    python_client_drives_keel(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_sends_streams_gets_and_cancels_tasks_without_keys() {
    python_client_drives_keel(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_javascript_client_talks_to_keel() {
    let clients = tokio::task::block_in_place(protocol_clients_js);
    let mock = MockLlm::start().await;
    let dir = workspace(&mock, true);
    let server = serve(&dir);
    let base = format!("http://{}", server.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new("node")
            .args(["-e", NODE_CLIENT, &base, KEY])
            .current_dir(&clients)
            .output()
            .unwrap()
    });
    let lines = json_lines(&output);
    assert_eq!(lines[0]["kind"], "task");
    assert_eq!(lines[0]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(lines[0]["answer"], ANSWER);
    assert_eq!(lines[1]["kinds"][0], "task");
    assert!(
        lines[1]["kinds"]
            .as_array()
            .unwrap()
            .contains(&Value::from("artifactUpdate"))
    );
    assert_eq!(lines[1]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(lines[2]["got"], "TASK_STATE_COMPLETED");
    assert_eq!(lines[2]["context"], true);
    assert_ne!(
        lines[3]["cancel"], "cancelled",
        "an ended task cannot be cancelled"
    );
}
