//! The official AG-UI client (`@ag-ui/client`'s `HttpAgent`, which checks every event's shape
//! and order) against `keel serve`'s `/api/agui/{name}`: a run with a tool call and a text
//! answer, an approval that ends the AG-UI run with an interrupt and is answered in the next
//! run's `resume` (approved, and denied), and what Keel refuses, as the client reports it.

use std::process::Command;

use keel_test_support::test_clients::protocol_clients_js;
use keel_test_support::{MockLlm, Serving, TempWorkspace};
use serde_json::Value;

use crate::common::{json_lines, keel_in, tool_round_workspace};

const KEY: &str = "sk-keel-agui-client";

/// `assistant` reads its README (`read_file`); `guarded` calls `record`, which policy sends
/// for approval; workflow `relay` asks `assistant`.
fn workspace(mock: &MockLlm) -> TempWorkspace {
    tool_round_workspace(
        mock,
        "{ server: { apiKeys: [ { env: AGUI_CLIENT_KEY, role: client } ] } }",
        "Answers from the workspace's README.",
    )
    .yaml(
        r#"
apiVersion: keel/v1
kind: Workflow
metadata: { name: relay }
spec:
  nodes:
    - { id: ask, kind: agent, agent: assistant, input: "{{ input }}" }
"#,
    )
    .build()
}

const CLIENT: &str = r#"
const { HttpAgent } = require("@ag-ui/client");
const [base, key] = process.argv.slice(-2);
const headers = { Authorization: `Bearer ${key}` };
const out = (value) => console.log(JSON.stringify(value));

function agent(name, threadId) {
  return new HttpAgent({ url: `${base}/api/agui/${name}`, headers, threadId });
}

async function run(agent, parameters) {
  const types = [];
  const result = await agent.runAgent(parameters, {
    onEvent({ event }) { types.push(event.type); },
  });
  return { types, result: result.result, interrupts: agent.pendingInterrupts };
}

const plain = (messages) => messages.map((m) => ({
  role: m.role, content: m.content ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, args: c.function.arguments })),
  toolCallId: m.toolCallId ?? null,
}));

(async () => {
  // A tool call and a text answer.
  const reader = agent("assistant", "thread-readme");
  reader.addMessage({ id: "u1", role: "user", content: "What does the README say?" });
  const first = await run(reader, { runId: "run-1", context: [{ description: "User", value: "Ada" }] });
  out({ ...first, messages: plain(reader.messages) });
  const listed = await (await fetch(`${base}/api/requests?agent=assistant`, { headers })).json();
  const id = listed.data[0].requestId;
  const events = await (await fetch(`${base}/api/requests/${id}/events`, { headers })).json();
  out({ metadata: events.data[0].metadata, input: listed.data[0].input });

  // An approval: interrupt, then resume approving it.
  for (const approved of [true, false]) {
    const guarded = agent("guarded", `thread-approval-${approved}`);
    guarded.addMessage({ id: "u1", role: "user", content: "Record two." });
    const asked = await run(guarded, { runId: `ask-${approved}` });
    const interrupt = asked.interrupts[0];
    const resumed = await run(guarded, {
      runId: `resume-${approved}`,
      resume: [{ interruptId: interrupt.id, status: approved ? "resolved" : "cancelled",
                 payload: approved ? { approved: true, reason: "fine" } : undefined }],
    });
    out({ approved, asked, resumed, messages: plain(guarded.messages) });
  }

  // A workflow: its nodes as steps, its state as snapshots, its result as the answer.
  const flow = agent("relay", "thread-workflow");
  flow.addMessage({ id: "u1", role: "user", content: "What does the README say?" });
  const snapshots = [];
  const ran = await flow.runAgent({ runId: "flow-1" }, {
    onStateSnapshotEvent({ event }) { snapshots.push(event.snapshot); },
  });
  out({ snapshots, state: flow.state, result: ran.result,
        last: flow.messages[flow.messages.length - 1].content });

  // What Keel refuses comes back as the client's HTTP error.
  const refused = async (name, parameters) => {
    const refusing = agent(name, "thread-refused");
    refusing.addMessage({ id: "u1", role: "user", content: "Hello" });
    try { await refusing.runAgent(parameters); return { ok: true }; }
    catch (error) { return { status: error.status, message: error.payload?.error?.message ?? String(error) }; }
  };
  out(await refused("assistant", { tools: [{ name: "confirm", description: "Ask the user", parameters: {} }] }));
  out(await refused("nobody", {}));
  const wrong = new HttpAgent({ url: `${base}/api/agui/assistant`, headers: { Authorization: "Bearer sk-wrong" } });
  wrong.addMessage({ id: "u1", role: "user", content: "Hello" });
  try { await wrong.runAgent(); out({ ok: true }); } catch (error) { out({ status: error.status }); }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// The event types in order, runs of `TEXT_MESSAGE_CONTENT` as one (text merges when the
/// client reads slower than the run writes).
fn types(run: &Value) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    for kind in run["types"].as_array().unwrap() {
        let kind = kind.as_str().unwrap().to_owned();
        if kind == "TEXT_MESSAGE_CONTENT" && types.last() == Some(&kind) {
            continue;
        }
        types.push(kind);
    }
    types
}

fn serve(dir: &TempWorkspace) -> Serving {
    keel_in(dir).env("AGUI_CLIENT_KEY", KEY).serve()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_agui_client_renders_a_run_and_answers_an_approval_interrupt() {
    let clients = tokio::task::block_in_place(protocol_clients_js);
    let mock = MockLlm::start().await;
    let dir = workspace(&mock);
    let server = serve(&dir);
    let base = format!("http://{}", server.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new("node")
            .args(["-e", CLIENT, &base, KEY])
            .current_dir(&clients)
            .output()
            .unwrap()
    });
    let lines = json_lines(&output);

    // A tool round, then the answer: every event in order, as the client checked them.
    let first = &lines[0];
    assert_eq!(
        types(first),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "TOOL_CALL_RESULT",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED",
        ],
        "{first}"
    );
    assert_eq!(first["result"], "The tool said: hello from the workspace");
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert_eq!(messages[1]["toolCalls"][0]["name"], "read_file");
    assert_eq!(
        messages[1]["toolCalls"][0]["args"],
        r#"{"path":"README.md"}"#
    );
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["toolCallId"], "c1");
    assert_eq!(messages[2]["content"], "hello from the workspace\n");
    assert_eq!(messages[3]["role"], "assistant");
    assert_eq!(
        messages[3]["content"],
        "The tool said: hello from the workspace"
    );
    // The run as Keel recorded it: the thread and run ids, the context before the input.
    let recorded = &lines[1];
    assert_eq!(recorded["metadata"]["agui.threadId"], "thread-readme");
    assert_eq!(recorded["metadata"]["agui.runId"], "run-1");
    assert_eq!(recorded["input"], "User: Ada\n\nWhat does the README say?");

    // Approved: the AG-UI run ends with the interrupt, the next one resumes the same Keel run.
    for (line, approved) in [(&lines[2], true), (&lines[3], false)] {
        assert_eq!(line["approved"], approved);
        let asked = &line["asked"];
        assert_eq!(
            types(asked),
            [
                "RUN_STARTED",
                "STEP_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "STEP_FINISHED",
                "RUN_FINISHED",
            ],
            "{asked}"
        );
        let interrupt = &asked["interrupts"][0];
        assert_eq!(interrupt["reason"], "approval");
        assert_eq!(interrupt["toolCallId"], "rec1");
        assert_eq!(interrupt["metadata"]["tool"], "record");
        assert_eq!(interrupt["metadata"]["arguments"]["count"], 2);
        assert!(
            interrupt["id"].as_str().unwrap().starts_with("apr_"),
            "{interrupt}"
        );
        let resumed = &line["resumed"];
        assert_eq!(
            types(resumed),
            [
                "RUN_STARTED",
                "TOOL_CALL_RESULT",
                "STEP_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "STEP_FINISHED",
                "RUN_FINISHED",
            ],
            "{resumed}"
        );
        assert!(resumed["interrupts"].as_array().unwrap().is_empty());
        let messages = line["messages"].as_array().unwrap();
        let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
        assert_eq!(tool["toolCallId"], "rec1");
        if approved {
            assert_eq!(tool["content"], "recorded\n");
            assert_eq!(resumed["result"], "The tool said: recorded");
        } else {
            let content = tool["content"].as_str().unwrap();
            assert!(content.contains("denied"), "{content}");
        }
    }

    // A workflow: the first snapshot has it running, the last has every node's state and
    // the result, which is also the answer's text.
    let flow = &lines[4];
    let snapshots = flow["snapshots"].as_array().unwrap();
    assert_eq!(snapshots[0]["workflow"], "relay", "{flow}");
    assert_eq!(snapshots[0]["status"], "running");
    assert!(
        snapshots.iter().any(|s| s["nodes"]["ask"] == "running"),
        "{flow}"
    );
    let last = snapshots.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["nodes"]["ask"], "completed");
    assert_eq!(flow["state"], *last, "the client keeps the last snapshot");
    assert_eq!(flow["last"], "The tool said: hello from the workspace");

    // Refused: client-side tools, an unknown agent, a wrong key.
    assert_eq!(lines[5]["status"], 400);
    let message = lines[5]["message"].as_str().unwrap();
    assert!(
        message.contains("client-side tools are not offered"),
        "{message}"
    );
    assert_eq!(lines[6]["status"], 404);
    assert_eq!(lines[7]["status"], 401);
}
