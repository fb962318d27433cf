//! Model rounds: the request a round sends (the conversation so far, the agent's tools, the
//! model's parameters), the streamed answer assembled from its deltas (text streamed out as
//! `agent.output.delta`), and retries with backoff for errors the provider calls retryable.
//! Each round first records what it sends, section by section (`runtime.prompt.assembled`).

use std::sync::Arc;
use std::time::Instant;

use futures_util::{FutureExt, StreamExt};
use keel_types::{
    AdapterEvent, ErrorInfo, EventPayload, Message, ModelError, ModelEvent, ModelParams,
    ModelRequest, ModelStopReason, NATIVE_ADAPTER, PromptSection, Role, StoreError, Thinking,
    ToolCall, ToolSpec, Usage,
};
use sha2::{Digest, Sha256};

use super::AgentRun;
use crate::millis;
use crate::retry;

/// A complete model answer.
pub(super) struct Answer {
    pub text: String,
    pub calls: Vec<ToolCall>,
    /// The reasoning blocks before the answer, to send back with it.
    pub thinking: Vec<Thinking>,
    pub stop: ModelStopReason,
    /// What the round used.
    pub usage: Usage,
}

/// Failure of one model round.
pub(super) enum RoundError {
    Model(ModelError),
    Store(StoreError),
}

impl From<StoreError> for RoundError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl AgentRun {
    /// One model round, retried per the retry policy.
    pub(super) async fn model_round(&mut self, step: u32) -> Result<Answer, RoundError> {
        let policy = self.services.workspace.runtime.retry.model.clone();
        let mut attempt = 1;
        // Fallbacks taken in this round: at most one per model of the chain.
        let mut fell_back = 0;
        // A fallback that is not sticky answered the last round: this one asks the agent's
        // own model first again.
        if self.model_doc != self.agent.model
            && self
                .services
                .fallbacks
                .get(&self.agent.model)
                .is_some_and(|f| !f.sticky)
        {
            self.model_doc = self.agent.model.clone();
            self.provider = self.primary.clone();
        }
        let tools = match &self.program_ask {
            Some(ask) => ask.tools.clone().into(),
            None => self.services.gateway.specs(&self.agent.tools),
        };
        self.make_room(step, &tools, false).await?;
        let mut sections = self.round_sections(step, &tools)?;
        // The model said the prompt was too long, and room was made once this round.
        let mut overflowed = false;
        loop {
            // Room under the model's rate limits, held until the attempt's answer is in.
            let limiter = self.services.limiters.get(&self.model_doc).cloned();
            let in_flight = match &limiter {
                Some(limiter) => {
                    let (waited, permit) = limiter.admit().await;
                    if waited >= std::time::Duration::from_millis(1) {
                        self.emitter.emit(EventPayload::ModelQueued {
                            step,
                            model: self.model_doc.clone(),
                            wait_ms: millis(waited),
                        })?;
                    }
                    permit
                }
                None => None,
            };
            let round = self.emitter.emit(EventPayload::ModelStarted {
                step,
                attempt,
                model: self.provider.model_name().to_owned(),
                provider: self.provider.provider_name().to_owned(),
                params: self.model_params(),
            })?;
            let started = Instant::now();
            let traceparent = self
                .propagation
                .of(&keel_types::trace::seq_key("chat", round));
            let answered = self
                .stream_answer(step, &tools, &sections, traceparent)
                .await;
            // Not held through a retry's backoff.
            drop(in_flight);
            match answered {
                Ok((mut answer, mut usage)) => {
                    usage.cost = self.round_cost(&usage);
                    answer.usage = usage;
                    self.measured = Some((self.messages.len(), usage.prompt_tokens));
                    if let Some(limiter) = &limiter {
                        limiter.used(usage.total_tokens);
                    }
                    self.usage.add(&usage);
                    self.emitter.emit(EventPayload::ModelCompleted {
                        step,
                        stop_reason: answer.stop,
                        usage,
                        latency_ms: millis(started.elapsed()),
                        content: answer.text.clone(),
                        tool_calls: answer.calls.clone(),
                        thinking: answer.thinking.clone(),
                    })?;
                    return Ok(answer);
                }
                Err(RoundError::Model(keel_types::ModelError::ContextLength(_)))
                    if !overflowed && self.make_room(step, &tools, true).await? =>
                {
                    overflowed = true;
                    sections = self.round_sections(step, &tools)?;
                }
                Err(RoundError::Model(error))
                    if error.is_retryable() && attempt < policy.max_attempts =>
                {
                    if let (Some(limiter), Some(delay)) = (&limiter, error.retry_after()) {
                        limiter.pause(delay);
                    }
                    let delay = retry::backoff(&policy, attempt, error.retry_after());
                    tracing::debug!(request_id = %self.record.request_id, attempt, ?delay, %error, "Retrying model round.");
                    self.emitter.emit(EventPayload::ModelRetry {
                        step,
                        attempt,
                        error: ErrorInfo::new(error.code(), error.to_string()),
                        delay_ms: millis(delay),
                    })?;
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(RoundError::Model(error)) if error.is_retryable() => {
                    let next = self.next_fallback().filter(|_| {
                        fell_back += 1;
                        fell_back
                            <= self
                                .services
                                .fallbacks
                                .get(&self.agent.model)
                                .map_or(0, |f| f.chain.len())
                    });
                    let Some((next, provider)) = next else {
                        return Err(RoundError::Model(error));
                    };
                    let note = self.untranslated_thinking(provider.provider_name());
                    self.emitter.emit(EventPayload::ModelFallback {
                        step,
                        from: std::mem::replace(&mut self.model_doc, next.clone()),
                        to: next,
                        reason: ErrorInfo::new(error.code(), error.to_string()),
                        note,
                    })?;
                    self.provider = provider;
                    attempt = 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The prompt's sections in order, each by size and hash; empty sections are left out.
    /// Messages are only ever appended after the input, so the sections before this run's
    /// rounds are measured once (again only if their bounds moved).
    fn prompt_sections(&mut self) -> Vec<PromptSection> {
        if let Some(ask) = &self.program_ask {
            // A program's conversation is its own: one section.
            let tokens = self.tokens.tokenizer().messages(&ask.messages);
            return vec![section("program", &ask.messages, tokens)];
        }
        let (history_at, history_end) = self.history_span;
        let input_end = (self.input_at + 1).min(self.messages.len());
        let spans = [
            ("instructions", 0, self.skills_at),
            ("skills", self.skills_at, self.memory_at),
            ("memory", self.memory_at, history_at),
            ("history", history_at, history_end),
            ("hook_context", history_end, self.input_at),
            ("input", self.input_at, input_end),
            ("rounds", input_end, self.messages.len()),
        ];
        self.token_counter();
        let mut measure = |(name, start, end): (&str, usize, usize)| {
            let messages = self.messages.get(start..end).filter(|m| !m.is_empty())?;
            let tokens = self.tokens.span(&self.messages, start, end);
            Some(section(name, messages, tokens))
        };
        let bounds = spans.map(|(_, _, end)| end);
        let fixed = match &self.fixed_sections {
            Some((fixed, sections)) if fixed[..] == bounds[..6] => Some(sections.clone()),
            _ => None,
        };
        let mut sections = match fixed {
            Some(sections) => sections,
            None => {
                let sections: Vec<PromptSection> =
                    spans[..6].iter().filter_map(|s| measure(*s)).collect();
                let mut fixed = [0; 6];
                fixed.copy_from_slice(&bounds[..6]);
                self.fixed_sections = Some((fixed, sections.clone()));
                sections
            }
        };
        sections.extend(measure(spans[6]));
        sections
    }

    /// The round's prompt sections, the tool definitions last, recorded
    /// (`runtime.prompt.assembled`).
    fn round_sections(
        &mut self,
        step: u32,
        tools: &Arc<[ToolSpec]>,
    ) -> Result<Vec<PromptSection>, StoreError> {
        let mut sections = self.prompt_sections();
        sections.extend(self.tools_section(tools));
        self.emitter.emit(EventPayload::PromptAssembled {
            step,
            sections: sections.clone(),
        })?;
        Ok(sections)
    }

    /// The tool definitions a round sends, measured like a prompt section (`tools`), if
    /// there are any.
    pub(super) fn tools_section(&mut self, tools: &Arc<[ToolSpec]>) -> Option<PromptSection> {
        if tools.is_empty() {
            return None;
        }
        match &self.tools_section {
            Some((measured, section)) if Arc::ptr_eq(measured, tools) => Some(section.clone()),
            _ => {
                let json = serde_json::to_string(&tools[..]).unwrap_or_default();
                let tokens = self.token_counter().tokenizer().count(&json);
                let section = PromptSection {
                    name: "tools".to_owned(),
                    messages: u32::try_from(tools.len()).unwrap_or(u32::MAX),
                    bytes: json.len() as u64,
                    sha256: keel_types::to_hex(&Sha256::digest(&json)),
                    tokens,
                };
                self.tools_section = Some((tools.clone(), section.clone()));
                Some(section)
            }
        }
    }

    /// Streams one answer, emitting text deltas, and assembles it.
    async fn stream_answer(
        &self,
        step: u32,
        tools: &Arc<[ToolSpec]>,
        sections: &[PromptSection],
        traceparent: String,
    ) -> Result<(Answer, Usage), RoundError> {
        let request = match &self.program_ask {
            // A process-backed agent's round: its program's conversation and tools.
            Some(ask) => ModelRequest {
                messages: ask.messages.clone(),
                tools: tools.clone(),
                params: ask.params.over(&self.model_params()),
                stream: self.stream,
                sections: sections.to_vec(),
                traceparent: Some(traceparent.clone()),
            },
            None => ModelRequest {
                messages: self.messages.clone(),
                tools: tools.clone(),
                params: self.model_params(),
                stream: self.stream,
                sections: sections.to_vec(),
                traceparent: Some(traceparent.clone()),
            },
        };
        let mut stream = self
            .provider
            .stream(request)
            .await
            .map_err(RoundError::Model)?;
        let mut text = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut thinking = Thinkings::default();
        let mut usage = Usage::default();
        let mut stop = None;
        // What was read ahead while gathering text deltas, to be handled next (`Some(None)`:
        // the stream ended).
        let mut ahead = None;
        loop {
            let item = match ahead.take() {
                Some(item) => item,
                None => stream.next().await,
            };
            let Some(item) = item else { break };
            match item.map_err(RoundError::Model)? {
                ModelEvent::TextDelta { text: mut delta } => {
                    // Deltas that are already here (one network read, or a loop that fell
                    // behind) become one event: the same text, fewer events to store.
                    while let Some(next) = stream.next().now_or_never() {
                        match next {
                            Some(Ok(ModelEvent::TextDelta { text: more })) => {
                                delta.push_str(&more);
                            }
                            other => {
                                ahead = Some(other);
                                break;
                            }
                        }
                    }
                    text.push_str(&delta);
                    // A program's round is not the agent's answer: the program's final
                    // answer is streamed when it comes (`agent_loop/backend.rs`).
                    if self.program_ask.is_some() {
                        continue;
                    }
                    self.emitter.emit(EventPayload::Adapter {
                        event: AdapterEvent::OutputDelta {
                            adapter: NATIVE_ADAPTER.to_owned(),
                            step,
                            text: delta,
                        },
                    })?;
                }
                ModelEvent::ToolCallStart { index, id, name } => {
                    if index != calls.len() {
                        return Err(RoundError::Model(ModelError::MalformedStream(format!(
                            "tool call {index} started after {} call(s)",
                            calls.len()
                        ))));
                    }
                    calls.push(ToolCall {
                        id,
                        name,
                        arguments: String::new(),
                    });
                }
                ModelEvent::ToolCallArgsDelta { index, delta } => match calls.get_mut(index) {
                    Some(call) => call.arguments.push_str(&delta),
                    None => {
                        return Err(RoundError::Model(ModelError::MalformedStream(format!(
                            "arguments for tool call {index}, which never started"
                        ))));
                    }
                },
                ModelEvent::ThinkingDelta { index, text } => {
                    thinking.at(index)?.0.push_str(&text);
                }
                ModelEvent::ThinkingSignature { index, signature } => {
                    thinking.at(index)?.1.push_str(&signature);
                }
                ModelEvent::RedactedThinking { index, data } => {
                    *thinking.at(index)? = (String::new(), String::new(), Some(data));
                }
                ModelEvent::Usage { usage: u } => usage = u,
                ModelEvent::Stop { reason } => stop = Some(reason),
            }
        }
        let stop = stop.ok_or_else(|| {
            RoundError::Model(ModelError::MalformedStream(
                "the answer ended without a stop reason".into(),
            ))
        })?;
        let answer = Answer {
            text,
            calls,
            thinking: thinking.finish(),
            stop,
            usage,
        };
        Ok((answer, usage))
    }

    /// A note of the thinking blocks in the conversation that `provider` will not be sent:
    /// only the provider that wrote them takes them back.
    fn untranslated_thinking(&self, provider: &str) -> Option<String> {
        if provider == self.provider.provider_name() {
            return None;
        }
        let blocks: usize = self
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.thinking.len())
            .sum();
        (blocks > 0).then(|| {
            format!(
                "{blocks} thinking block(s) written by {} are not sent to {provider}",
                self.provider.provider_name()
            )
        })
    }

    /// What a round's usage costs at its model's declared `pricing`, if it declares one.
    fn round_cost(&self, usage: &Usage) -> Option<keel_types::cost::Cost> {
        let pricing = self
            .services
            .workspace
            .models
            .get(&self.model_doc)?
            .pricing
            .as_ref()?
            .pricing()?;
        Some(pricing.cost(usage))
    }

    /// The next of the agent's model's fallbacks after the one answering now, if any.
    fn next_fallback(&self) -> Option<(String, Arc<dyn keel_types::ModelProvider>)> {
        let chain = &self.services.fallbacks.get(&self.agent.model)?.chain;
        let after = chain
            .iter()
            .position(|(name, _)| *name == self.model_doc)
            .map_or(0, |at| at + 1);
        chain.get(after).cloned()
    }

    /// The parameters a round sends: the request's over the Model document's.
    fn model_params(&self) -> ModelParams {
        let document = self
            .services
            .workspace
            .models
            .get(&self.model_doc)
            .map(|m| ModelParams {
                temperature: m.params.temperature,
                max_tokens: m.params.max_tokens,
                ..ModelParams::default()
            })
            .unwrap_or_default();
        self.params.over(&document)
    }
}

/// Thinking blocks as they stream in: text, signature, or a redacted block's data.
#[derive(Default)]
struct Thinkings(Vec<(String, String, Option<String>)>);

impl Thinkings {
    /// Block `index`: the next one starts it, an earlier one continues it.
    fn at(&mut self, index: usize) -> Result<&mut (String, String, Option<String>), RoundError> {
        if index == self.0.len() {
            self.0.push(Default::default());
        }
        let blocks = self.0.len();
        self.0.get_mut(index).ok_or_else(|| {
            RoundError::Model(ModelError::MalformedStream(format!(
                "thinking block {index} came after {blocks} block(s)"
            )))
        })
    }

    fn finish(self) -> Vec<Thinking> {
        self.0
            .into_iter()
            .map(|(thinking, signature, redacted)| match redacted {
                Some(data) => Thinking::RedactedThinking { data },
                None => Thinking::Thinking {
                    thinking,
                    signature,
                },
            })
            .collect()
    }
}

/// One prompt section of `tokens`: its messages counted, measured and hashed as JSON.
pub(super) fn section(name: &str, messages: &[Message], tokens: u64) -> PromptSection {
    // Serializing plain messages cannot fail; an empty body would still be hashed honestly.
    let json = serde_json::to_vec(messages).unwrap_or_default();
    PromptSection {
        name: name.to_owned(),
        messages: u32::try_from(messages.len()).unwrap_or(u32::MAX),
        bytes: json.len() as u64,
        sha256: keel_types::to_hex(&Sha256::digest(&json)),
        tokens,
    }
}
