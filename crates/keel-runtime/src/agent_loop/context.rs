//! Keeping a run's prompt within its model's context window (`context`, with the model's
//! `contextWindow`): before each round the prompt's size is estimated — the last round's
//! prompt tokens as the provider counted them plus an estimate of what was added, never less
//! than the estimate of the whole — and when it passes `compactAt` of the window, or the
//! model answered that the prompt is too long, room is made: old tool results are elided,
//! then the oldest rounds summarized by the summarizer model. Instructions, skills, memory,
//! history and the input are never touched, the last `keepRecent` rounds stay word for word,
//! a call is never parted from its result (whole rounds are summarized), and a summary that
//! fails or comes back empty leaves the prompt as it was. Each compaction is recorded
//! (`runtime.context.compacted`, stored before the round goes on) so a resumed run rebuilds
//! the same prompt without summarizing again.

use std::sync::Arc;

use keel_types::{EventPayload, Message, StoreError, ToolSpec, Usage};
use keel_workspace::{CompactStep, ContextSpec};

use super::AgentRun;
use crate::context::{
    TokenCounter, Tokenizer, elide, kept_from, summary_message, transcript, with_elided_texts,
};

/// The share of the summarizer's window its input may fill (the rest is its answer's).
const SUMMARIZER_INPUT: f64 = 0.6;

/// How many of `rounds` (a prefix of whole rounds, at least the first) a summarizer with a
/// `window`-token context can read.
fn fitting(rounds: &[Message], window: u64) -> usize {
    let budget = (window as f64 * SUMMARIZER_INPUT) as u64;
    let starts = crate::context::round_starts(rounds);
    let mut upto = 0;
    for (i, _) in starts.iter().enumerate() {
        let next = starts.get(i + 1).copied().unwrap_or(rounds.len());
        let text = transcript(&rounds[..next], crate::context::TRANSCRIPT_CHARS);
        let tokens = (text.len() + crate::context::SUMMARIZE.len()) as u64 / 4 + 16;
        if tokens > budget && upto > 0 {
            break;
        }
        upto = next;
    }
    upto
}

impl AgentRun {
    /// The run's context settings and its model's window, when compaction applies (the
    /// model declares `contextWindow`; a process-backed agent manages its own conversation).
    fn context_limits(&self) -> Option<(ContextSpec, u64)> {
        if self.program_ask.is_some() {
            return None;
        }
        let workspace = &self.services.workspace;
        let window = workspace.models.get(&self.model_doc)?.context_window?;
        let spec = self
            .agent
            .context
            .clone()
            .unwrap_or_else(|| workspace.runtime.context.clone());
        Some((spec, window))
    }

    /// The prompt's estimated size in tokens, with `tools`.
    pub(super) fn prompt_estimate(&mut self, tools: &Arc<[ToolSpec]>) -> u64 {
        // The tools' size is measured once per tool list, with their prompt section.
        let tools_tokens = self.tools_section(tools).map_or(0, |s| s.tokens);
        self.token_counter();
        self.tokens
            .prompt_estimate(&self.messages, tools_tokens, self.measured)
    }

    /// The counter of the prompt's tokens, with the tokenizer of the model the run is on
    /// now (a fallback to a model of another family starts counting again).
    pub(super) fn token_counter(&mut self) -> &mut TokenCounter {
        let tokenizer = self
            .services
            .workspace
            .models
            .get(&self.model_doc)
            .map(Tokenizer::of)
            .unwrap_or_default();
        if self.tokens.tokenizer() != tokenizer {
            self.tokens = TokenCounter::new(tokenizer);
            // The sections measured once are counted again with it.
            self.fixed_sections = None;
            self.tools_section = None;
        }
        &mut self.tokens
    }

    /// Makes room in the prompt when it passed `compactAt` of the window, or whatever it
    /// holds when the model said it was too long (`overflow`). Whether the prompt changed.
    pub(super) async fn make_room(
        &mut self,
        step: u32,
        tools: &Arc<[ToolSpec]>,
        overflow: bool,
    ) -> Result<bool, StoreError> {
        let Some((spec, window)) = self.context_limits() else {
            return Ok(false);
        };
        let threshold = (window as f64 * spec.compact_at.clamp(0.1, 1.0)) as u64;
        let before = self.prompt_estimate(tools);
        if !overflow && before <= threshold {
            return Ok(false);
        }
        let rounds_at = (self.input_at + 1).min(self.messages.len());
        // Past the window, even the recent rounds may go (the current turn never does).
        let keep = if overflow {
            1
        } else {
            spec.keep_recent as usize
        };
        let mut elided = Vec::new();
        let mut summarized = None;
        let mut summary = None;
        let mut summarizer_usage = None;
        let mut error = None;
        for way in &spec.strategy {
            if !overflow && self.prompt_estimate(tools) <= threshold {
                break;
            }
            let rounds = &mut self.messages[rounds_at..];
            let kept = kept_from(rounds, keep);
            match way {
                CompactStep::Elide => {
                    for (id, text) in elide(rounds, kept) {
                        self.elided_texts.insert(id.clone(), text);
                        elided.push(id);
                    }
                    self.tokens.forget();
                }
                CompactStep::Summarize if kept > 0 => {
                    // The summarizer reads what elided results said, not their stubs, and as
                    // many of the oldest whole rounds as fit its own window.
                    let old = with_elided_texts(&rounds[..kept], &self.elided_texts);
                    let window = self.summarizer_window(&spec).unwrap_or(window);
                    let kept = fitting(&old, window);
                    let old = old[..kept].to_vec();
                    // A run answered from a recording (a replay, a cassette) takes the
                    // original's summary; a live run asks its summarizer.
                    let summarized_by = match self.provider.recorded_summary() {
                        Some(recorded) => recorded,
                        None => self.summarize(&spec, &old).await,
                    };
                    match summarized_by {
                        Ok((text, usage)) => {
                            let gone: Vec<String> =
                                old.iter().filter_map(|m| m.tool_call_id.clone()).collect();
                            for id in gone {
                                self.elided_texts.remove(&id);
                            }
                            self.messages
                                .splice(rounds_at..rounds_at + kept, [summary_message(&text)]);
                            self.tokens.forget();
                            self.usage.add(&usage);
                            summarized = Some([0, u32::try_from(kept).unwrap_or(u32::MAX)]);
                            summary = Some(text);
                            summarizer_usage = Some(usage);
                        }
                        Err(why) => error = Some(why),
                    }
                }
                CompactStep::Summarize => {}
            }
        }
        let changed = !elided.is_empty() || summarized.is_some();
        if !changed && error.is_none() {
            return Ok(false);
        }
        self.measured = None;
        let after = self.prompt_estimate(tools);
        self.emitter
            .emit_durable(EventPayload::ContextCompacted {
                step,
                reason: if overflow { "overflow" } else { "threshold" }.to_owned(),
                tokens_before: before,
                tokens_after: after,
                elided,
                summarized,
                summary,
                summarizer_usage,
                error,
            })
            .await?;
        Ok(changed)
    }

    /// The summarizer's own context window, if it is another model that declares one.
    fn summarizer_window(&self, spec: &ContextSpec) -> Option<u64> {
        let name = spec.summarizer.as_deref()?;
        self.services.workspace.models.get(name)?.context_window
    }

    /// The summarizer: `context.summarizer`, or the agent's model.
    fn summarizer(&self, spec: &ContextSpec) -> Result<Arc<dyn keel_types::ModelProvider>, String> {
        match &spec.summarizer {
            Some(name) => self
                .services
                .providers
                .get(name)
                .cloned()
                .ok_or_else(|| format!("the summarizer model `{name}` is not usable")),
            None => Ok(self.provider.clone()),
        }
    }

    /// A summary of `rounds` by the summarizer: its text and usage, or why there is none.
    async fn summarize(
        &self,
        spec: &ContextSpec,
        rounds: &[Message],
    ) -> Result<(String, Usage), String> {
        let provider = self.summarizer(spec)?;
        let (text, mut usage) = crate::context::summarize(provider.as_ref(), rounds).await?;
        let pricing = spec
            .summarizer
            .as_deref()
            .and_then(|name| self.services.workspace.models.get(name))
            .or_else(|| self.services.workspace.models.get(&self.model_doc))
            .and_then(|m| m.pricing.as_ref())
            .and_then(|p| p.pricing());
        usage.cost = pricing.map(|p| p.cost(&usage));
        Ok((text, usage))
    }
}
