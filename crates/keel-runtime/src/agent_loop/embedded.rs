//! A tool call made inside another run's log: a workflow's tool node. It takes the path of
//! every direct call — `runtime.tool.direct.started`, the gateway's guard, policy,
//! `PreToolUse` hooks, a human when asked (a durable approval), the write-ahead start,
//! execution, `PostToolUse` hooks, `runtime.tool.direct.completed` — with its events in the
//! workflow run's log and no run record of its own (the workflow run owns its record and
//! status). One history per workflow, like the activities of a durable-execution engine.

use std::sync::Arc;

use keel_types::{ModelProvider, RunRecord, StoreError, ToolCall};
use keel_workspace::AgentSpec;
use tokio_util::sync::CancellationToken;

use super::{AgentRun, DirectCall, End, Launch, Services, Start};
use crate::emitter::Emitter;

/// How an embedded call ended: its output (what a model would have received), or why it
/// failed.
pub(crate) type CallOutcome = Result<String, String>;

/// Runs `call` with `inventory` as the only tool, under the name `agent` (what policies
/// and hooks see), its events in `record`'s log through `emitter`. `shutdown` is the host
/// run's interruption. `resumed`: the call had started in an earlier process of the host run
/// (which may have asked a person about it).
pub(crate) async fn embedded_call(
    services: Arc<Services>,
    emitter: Arc<Emitter>,
    record: RunRecord,
    agent: &str,
    call: ToolCall,
    shutdown: CancellationToken,
    resumed: bool,
) -> Result<CallOutcome, StoreError> {
    let spec = AgentSpec {
        tools: vec![call.name.clone()],
        ..placeholder_agent()
    };
    let provider: Arc<dyn ModelProvider> = Arc::new(crate::replay::replay_provider(&[]));
    let record = RunRecord {
        agent: agent.to_owned(),
        ..record
    };
    let launch = Launch {
        direct: Some(DirectCall {
            call: call.clone(),
            task: None,
        }),
        ..Launch::new(record, spec, provider, Start::Fresh)
    };
    let mut run = AgentRun::new(services, emitter, launch);
    run.embedded = true;
    run.asked_before = resumed;
    run.interrupt = shutdown;
    // Tools of MCP servers are listed once their servers answered.
    run.services.gateway.settle(&run.agent.tools).await;
    Ok(match run.run_direct(call).await? {
        End::Answer { output, .. } => Ok(output),
        End::Failed { error, .. } => Err(error.message),
        End::Unsettled(failure) => Err(failure),
        End::Cancelled | End::Interrupted => Err("the call was stopped".to_owned()),
    })
}

/// An agent with no model, instructions or tools: the inventory is set per call.
fn placeholder_agent() -> AgentSpec {
    AgentSpec {
        sandbox: Default::default(),
        model: String::new(),
        instructions: String::new(),
        tools: Vec::new(),
        skills: Vec::new(),
        always_on_skills: Vec::new(),
        limits: Default::default(),
        context: None,
        contract: Default::default(),
        gateway: Default::default(),
        output: None,
        subagents: Vec::new(),
        facade: Default::default(),
        backend: Default::default(),
    }
}
