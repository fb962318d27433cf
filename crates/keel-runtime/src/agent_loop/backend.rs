//! The run's side of a process-backed agent (`backend: {kind: process}`): the adapter starts
//! the program; this answers what it asks — each model round through [`AgentRun::model_round`]
//! and each tool call through [`AgentRun::run_tools_reporting`], exactly as the native loop
//! makes them — one at a time, in the order they come, until the program answers or fails.

use keel_types::{
    AdapterEvent, ErrorCode, EventPayload, FinishReason, ModelStopReason, ToolCall, Usage,
};
use keel_workspace::ProcessBackend;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod replay;

use std::collections::VecDeque;

use keel_workspace::OnDivergence;
use serde_json::Value;

use super::model::{Answer, RoundError, section};
use super::{AgentRun, End};
use crate::adapter::{
    AdapterAnswer, AdapterFailure, AdapterRun, Ask, AskRefused, ModelAsk, ModelReply, RunCalls,
    ToolReply,
};

/// The adapter name process-backed runs' `agent.*` events carry.
pub(crate) const PROCESS_ADAPTER: &str = "process";

/// The most `agent.log` events one run keeps; later lines are counted, not kept.
const MAX_LOG_EVENTS: u32 = 200;
/// The longest `agent.log` line kept, in characters (control characters become spaces).
const MAX_LOG_LINE: usize = 2000;

/// What the program's run needs besides the [`AgentRun`].
pub(super) struct ProgramState {
    /// The calls of the model's last answer not yet made: a program's tool call takes the id
    /// of the one it matches, so the log pairs them as in a native run.
    unmatched: Vec<ToolCall>,
    logged: u32,
    dropped: u32,
    /// A resumed run's earlier steps, answered from its log before the run goes on live.
    replay: VecDeque<replay::Recorded>,
    on_divergence: OnDivergence,
}

impl AgentRun {
    /// Runs the agent's program to its end.
    pub(super) async fn drive_program(&mut self, backend: ProcessBackend) -> End {
        let Some(adapter) = self.services.adapters.process.clone() else {
            return End::failed(
                ErrorCode::ProgramFailed,
                "this runtime has no process adapter (an embedding that left it out)",
                FinishReason::Internal,
            );
        };
        let (tx, mut rx) = mpsc::channel(8);
        let ended = CancellationToken::new();
        // Cancelled however this returns (also when the run's future is dropped).
        let _ended = ended.clone().drop_guard();
        let (history_at, history_end) = self.history_span;
        let resumed = matches!(self.start, super::Start::Resumed { .. });
        let replay = match resumed {
            true => match self.services.store.events(&self.record.request_id, 0).await {
                Ok(events) => replay::recorded(&events),
                Err(error) => return End::store(error),
            },
            false => VecDeque::new(),
        };
        let on_divergence = backend.on_divergence;
        // A resumed run's messages hold its earlier rounds; the program gets the prompt.
        let prompt_end = (self.input_at + 1).min(self.messages.len());
        let run = AdapterRun {
            request_id: self.record.request_id.clone(),
            session_id: self.record.session_id.clone(),
            agent: self.record.agent.clone(),
            backend,
            workspace_root: self.services.workspace.root.clone(),
            input: self.record.input.clone(),
            history: self.messages[history_at..history_end].to_vec(),
            instructions: self.agent.instructions.clone(),
            messages: self.messages[..prompt_end].to_vec(),
            tools: self.services.gateway.specs(&self.agent.tools).to_vec(),
            model: self.agent.model.clone(),
            calls: RunCalls::new(tx, ended.clone()),
            resumed,
        };
        let mut program = adapter.run(run);
        let mut state = ProgramState {
            unmatched: Vec::new(),
            logged: 0,
            dropped: 0,
            replay,
            on_divergence,
        };
        let mut open = true;
        let outcome = loop {
            tokio::select! {
                ask = rx.recv(), if open => match ask {
                    Some(ask) => {
                        if let Err(end) = self.answer(ask, &mut state).await {
                            return end;
                        }
                    }
                    None => open = false,
                },
                outcome = &mut program => break outcome,
            }
        };
        // Lines it wrote just before it ended are kept too.
        while let Ok(ask) = rx.try_recv() {
            if let Ask::Progress(_) | Ask::Log(_) = ask
                && let Err(end) = self.answer(ask, &mut state).await
            {
                return end;
            }
        }
        if state.dropped > 0 {
            let note = format!("{} more line(s) not kept", state.dropped);
            if let Err(error) = self.log_line("stderr", note) {
                return End::store(error);
            }
        }
        match outcome {
            Ok(AdapterAnswer { output, value }) => {
                if !output.is_empty()
                    && let Err(error) = self.emitter.emit(EventPayload::Adapter {
                        event: AdapterEvent::OutputDelta {
                            adapter: PROCESS_ADAPTER.to_owned(),
                            step: self.steps,
                            text: output.clone(),
                        },
                    })
                {
                    return End::store(error);
                }
                let answer = Answer {
                    text: output,
                    calls: Vec::new(),
                    thinking: Vec::new(),
                    stop: ModelStopReason::Stop,
                    usage: Usage::default(),
                };
                Box::pin(self.final_answer(answer, value)).await
            }
            Err(AdapterFailure::Ended) => End::failed(
                ErrorCode::ProgramFailed,
                "the program ended with the run",
                FinishReason::Internal,
            ),
            Err(failure) => End::failed(
                ErrorCode::ProgramFailed,
                failure.to_string(),
                FinishReason::Internal,
            ),
        }
    }

    /// Answers one request of the program; an `End` ends the run (the program is told).
    async fn answer(&mut self, ask: Ask, state: &mut ProgramState) -> Result<(), End> {
        match ask {
            Ask::Model(ask, reply) => {
                let answered = match self.replayed_round(&ask, state) {
                    Ok(Some(recorded)) => Ok(recorded),
                    Ok(None) => self.program_round(ask).await,
                    Err(end) => Err(end),
                };
                let (result, end) = match answered {
                    Ok(reply) => {
                        state.unmatched = reply.calls.clone();
                        (Ok(reply), None)
                    }
                    Err(end) => (Err(refusal(&end)), Some(end)),
                };
                let _ = reply.send(result);
                end.map_or(Ok(()), Err)
            }
            Ask::Tool(name, arguments, reply) => {
                let mut id = take_matching(&mut state.unmatched, &name, &arguments);
                match self.replayed_call(&name, &arguments, state) {
                    Err(end) => {
                        let _ = reply.send(Err(refusal(&end)));
                        return Err(end);
                    }
                    Ok(Some(Replayed::Answer(answer))) => {
                        let _ = reply.send(Ok(answer));
                        return Ok(());
                    }
                    Ok(Some(Replayed::Live(recorded_id))) => id = recorded_id,
                    Ok(None) => {}
                }
                let call = ToolCall {
                    id,
                    name,
                    arguments: arguments.to_string(),
                };
                let results = self
                    .run_tools_reporting(std::slice::from_ref(&call))
                    .await
                    .map_err(End::store)?;
                let (output, ok) = results
                    .into_iter()
                    .next()
                    .map_or((String::new(), false), |(message, ok)| {
                        (message.content, ok)
                    });
                let _ = reply.send(Ok(ToolReply {
                    output,
                    is_error: !ok,
                }));
                match self.stop.take() {
                    Some(reason) => Err(End::failed(
                        ErrorCode::HookStopped,
                        reason,
                        FinishReason::Stopped,
                    )),
                    None => Ok(()),
                }
            }
            Ask::Progress(progress) => self
                .emitter
                .emit(EventPayload::Adapter {
                    event: AdapterEvent::Progress {
                        adapter: PROCESS_ADAPTER.to_owned(),
                        kind: progress.kind,
                        data: progress.data,
                    },
                })
                .map(drop)
                .map_err(End::store),
            Ask::Log(line) => {
                if state.logged >= MAX_LOG_EVENTS {
                    state.dropped += 1;
                    return Ok(());
                }
                state.logged += 1;
                let (stream, line) = match line.strip_prefix("stderr:") {
                    Some(rest) => ("stderr", rest),
                    None => ("stdout", line.strip_prefix("stdout:").unwrap_or(&line)),
                };
                self.log_line(stream, keel_types::one_line(line, MAX_LOG_LINE))
                    .map_err(End::store)
            }
        }
    }

    fn log_line(&self, stream: &str, line: String) -> Result<(), keel_types::StoreError> {
        self.emitter
            .emit(EventPayload::Adapter {
                event: AdapterEvent::Log {
                    adapter: PROCESS_ADAPTER.to_owned(),
                    stream: stream.to_owned(),
                    line,
                },
            })
            .map(drop)
    }

    /// One model round the program asked for, under the run's step and token budgets.
    async fn program_round(&mut self, ask: ModelAsk) -> Result<ModelReply, End> {
        if let Some(end) = self.budget_spent() {
            return Err(end);
        }
        let max_steps = self.max_steps();
        if self.steps >= max_steps {
            return Err(End::failed(
                ErrorCode::MaxSteps,
                format!("the agent used all {max_steps} steps without a final answer"),
                FinishReason::MaxSteps,
            ));
        }
        self.steps += 1;
        self.program_ask = Some(ask);
        let round = self.model_round(self.steps).await;
        self.program_ask = None;
        match round {
            Ok(answer) => Ok(ModelReply {
                text: answer.text,
                calls: answer.calls,
                stop: answer.stop,
                usage: answer.usage,
                model: self.provider.model_name().to_owned(),
            }),
            Err(RoundError::Model(error)) => Err(End::model(&error)),
            Err(RoundError::Store(error)) => Err(End::store(error)),
        }
    }
}

/// How a tool call of a resumed program is answered from its log.
enum Replayed {
    /// With the recorded result (the call is not made again).
    Answer(ToolReply),
    /// Live, under the recorded call's id (it was refused, or never ran, or it was cut off
    /// and its tool is idempotent).
    Live(String),
}

impl AgentRun {
    /// The recorded answer of the round a resumed program asks for, while its log holds
    /// rounds; `None` once the run is live.
    fn replayed_round(
        &mut self,
        ask: &ModelAsk,
        state: &mut ProgramState,
    ) -> Result<Option<ModelReply>, End> {
        let Some(front) = state.replay.front() else {
            return Ok(None);
        };
        let sent = section("program", &ask.messages, 0).sha256;
        let matches = match front {
            replay::Recorded::Round { sent: recorded, .. } => {
                recorded.as_ref().is_none_or(|hash| *hash == sent)
            }
            replay::Recorded::Call { .. } => false,
        };
        if !matches {
            return self.diverged("a model round", state).map(|()| None);
        }
        let Some(replay::Recorded::Round {
            text,
            calls,
            stop,
            usage,
            ..
        }) = state.replay.pop_front()
        else {
            return Ok(None);
        };
        Ok(Some(ModelReply {
            text,
            calls,
            stop,
            usage,
            model: self.provider.model_name().to_owned(),
        }))
    }

    /// How a resumed program's tool call is answered while its log holds calls; `None`
    /// once the run is live.
    fn replayed_call(
        &mut self,
        name: &str,
        arguments: &Value,
        state: &mut ProgramState,
    ) -> Result<Option<Replayed>, End> {
        let Some(front) = state.replay.front() else {
            return Ok(None);
        };
        let matches = matches!(front, replay::Recorded::Call { tool, arguments: recorded, .. }
            if tool == name && replay::same_arguments(recorded, arguments));
        if !matches {
            let asked = format!("a call of {name} with {arguments}");
            return self.diverged(&asked, state).map(|()| None);
        }
        let Some(replay::Recorded::Call {
            call_id,
            result,
            started,
            ..
        }) = state.replay.pop_front()
        else {
            return Ok(None);
        };
        Ok(Some(match result {
            Some((output, ok)) => Replayed::Answer(ToolReply {
                output,
                is_error: !ok,
            }),
            None if started && !self.services.gateway.is_idempotent(name) => {
                Replayed::Answer(ToolReply {
                    output: format!(
                        "the outcome of this call is unknown: the run stopped while {name} ran, \
                         and it is not run again because it is not idempotent"
                    ),
                    is_error: true,
                })
            }
            None => Replayed::Live(call_id),
        }))
    }

    /// The program asked for `asked` where the log holds something else next: the run
    /// fails, or goes on live (`onDivergence: continue`).
    fn diverged(&mut self, asked: &str, state: &mut ProgramState) -> Result<(), End> {
        let held = state
            .replay
            .front()
            .map(replay::describe)
            .unwrap_or_default();
        match state.on_divergence {
            OnDivergence::Continue => {
                tracing::warn!(request_id = %self.record.request_id, %asked, %held, "A resumed program diverged from its log; going on live.");
                state.replay.clear();
                Ok(())
            }
            OnDivergence::Fail => Err(End::failed(
                ErrorCode::ProgramFailed,
                format!(
                    "the resumed program diverged from its log: it asked for {asked} where the \
                     log holds {held} (set `onDivergence: continue` to go on live)"
                ),
                FinishReason::Internal,
            )),
        }
    }
}

/// The id of the first not yet made call of the last answer with this name and these
/// arguments (taken from the list), else a new one.
fn take_matching(
    unmatched: &mut Vec<ToolCall>,
    name: &str,
    arguments: &serde_json::Value,
) -> String {
    let found = unmatched.iter().position(|call| {
        call.name == name
            && serde_json::from_str::<serde_json::Value>(&call.arguments)
                .is_ok_and(|args| &args == arguments)
    });
    match found {
        Some(index) => unmatched.remove(index).id,
        None => format!("call_{:016x}", fastrand::u64(..)),
    }
}

/// What the program is told when the run ends on its request.
fn refusal(end: &End) -> AskRefused {
    AskRefused {
        message: match end {
            End::Failed { error, .. } => error.message.clone(),
            _ => "the run has ended".to_owned(),
        },
    }
}
