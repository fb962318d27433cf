//! Post-run extraction (`write-after-run`): after a writer's run completes, a `Memory`
//! document's `extraction.model` is asked for candidates from the conversation, and each is
//! decided by the write policy like a `remember` call. It runs as a run of its own (agent
//! `memory`, linked to the run as its parent), in the background: the run's answer has been
//! delivered before it starts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use keel_types::{
    ErrorCode, ErrorInfo, EventPayload, FinishReason, MemoryKind, Message, ModelEvent, ModelParams,
    ModelProvider, ModelRequest, RequestId, RunRecord, RunStatus, Usage,
};
use serde::Deserialize;

use super::{Access, Draft, MemoryService, Origin, run::MAINTENANCE_AGENT};
use crate::RuntimeError;
use crate::emitter::Emitter;
use crate::kernel::Kernel;

/// What the extraction model is asked to answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Extracted {
    memories: Vec<ExtractedMemory>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtractedMemory {
    text: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

/// The instructions of the extraction model.
fn instructions(max: u32) -> String {
    format!(
        "You read a finished conversation between a user and an assistant and pick out what is \
         worth remembering about the user for later conversations: lasting facts, preferences, \
         standing instructions. Leave out anything temporary, anything already obvious, and \
         secrets. Answer with JSON only, exactly of this form: {{\"memories\": [{{\"text\": \
         \"one self-contained sentence\", \"kind\": \"fact|preference|instruction|episode\", \
         \"tags\": [\"word\"]}}]}} with at most {max} entries; {{\"memories\": []}} when nothing \
         is worth keeping."
    )
}

/// The candidates in a model's answer, or what is wrong with it.
fn parse(answer: &str, max: u32) -> Result<Vec<Draft>, String> {
    let trimmed = answer.trim();
    // A fenced block (```json … ```) is read for its content.
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed);
    let extracted: Extracted = serde_json::from_str(body.trim()).map_err(|e| {
        format!(
            "the extraction model's answer is not JSON of the form {{\"memories\": [{{\"text\", \
             \"kind\", \"tags\"}}]}}: {e}"
        )
    })?;
    let mut drafts = Vec::new();
    for (i, memory) in extracted
        .memories
        .into_iter()
        .take(max as usize)
        .enumerate()
    {
        let kind = match memory.kind.as_deref() {
            None => MemoryKind::default(),
            Some(kind) => kind
                .parse()
                .map_err(|e| format!("memories[{i}].kind: {e}"))?,
        };
        drafts.push(Draft {
            kind,
            text: memory.text,
            tags: memory.tags,
        });
    }
    Ok(drafts)
}

/// The whole answer of one model round (text only).
async fn ask(provider: &dyn ModelProvider, messages: Vec<Message>) -> Result<String, String> {
    let request = ModelRequest {
        messages,
        tools: Vec::new(),
        params: ModelParams::default(),
        stream: false,
    };
    let mut stream = provider
        .stream(request)
        .await
        .map_err(|e| format!("the extraction model failed: {e}"))?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event.map_err(|e| format!("the extraction model failed: {e}"))? {
            ModelEvent::TextDelta { text: delta } => text.push_str(&delta),
            ModelEvent::Stop { .. } => break,
            _ => {}
        }
    }
    Ok(text)
}

/// A finished run to extract from.
pub(crate) struct Finished {
    pub record: RunRecord,
    pub metadata: BTreeMap<String, String>,
    pub output: String,
}

impl Kernel {
    /// Starts the extraction runs a completed run calls for (none when its agent writes no
    /// memory with `extraction`). Returns at once.
    pub(crate) fn extract_after(&self, finished: Finished) {
        let Ok(memory) = self.memory() else { return };
        let Ok(accesses) = memory.namespaces(
            &finished.record.agent,
            finished.record.session_id.as_ref(),
            &finished.metadata,
            true,
        ) else {
            return;
        };
        let finished = Arc::new(finished);
        for access in accesses {
            let Some(extraction) = memory
                .memories()
                .get(&access.memory)
                .and_then(|spec| spec.extraction.clone())
            else {
                continue;
            };
            let provider = match self.model_provider(&extraction.model) {
                Some(provider) => provider,
                None => {
                    tracing::warn!(model = %extraction.model, "The memory extraction model is unavailable.");
                    continue;
                }
            };
            let (kernel, memory, finished) = (self.clone(), memory.clone(), finished.clone());
            tokio::spawn(async move {
                if let Err(error) = kernel
                    .extract(
                        &memory,
                        &access,
                        provider,
                        &finished,
                        extraction.max_candidates,
                    )
                    .await
                {
                    tracing::warn!(request_id = %finished.record.request_id, %error, "Memory extraction could not be recorded.");
                }
            });
        }
    }

    /// One extraction, recorded as a run of its own.
    async fn extract(
        &self,
        memory: &MemoryService,
        access: &Access,
        provider: Arc<dyn ModelProvider>,
        finished: &Finished,
        max: u32,
    ) -> Result<RequestId, RuntimeError> {
        let started = Instant::now();
        let parent = &finished.record;
        let input = format!(
            "memory extraction for {} into {}",
            parent.request_id, access.namespace
        );
        let mut record = RunRecord::new(RequestId::generate(), None, MAINTENANCE_AGENT, input);
        record.links.parent_id = Some(parent.request_id.clone());
        self.store().create_run(&record).await?;
        let emitter = Emitter::new(self.pipeline(), &record, 0, None);
        emitter.emit(EventPayload::RequestStarted {
            input: record.input.clone(),
            history: Vec::new(),
            mode: None,
            metadata: Default::default(),
        })?;
        let messages = vec![
            Message::system(instructions(max)),
            Message::user(format!(
                "User: {}\n\nAssistant: {}",
                parent.input, finished.output
            )),
        ];
        let outcome = match ask(provider.as_ref(), messages).await {
            Ok(answer) => parse(&answer, max),
            Err(error) => Err(error),
        };
        let mut submitted = 0usize;
        let result = match outcome {
            Ok(drafts) => {
                let mut failure = None;
                for draft in drafts {
                    let origin = Origin {
                        request_id: parent.request_id.clone(),
                        session_id: parent.session_id.clone(),
                        agent: parent.agent.clone(),
                        call_id: None,
                        seq: None,
                    };
                    match memory
                        .submit_from(access, draft, origin, keel_types::MemorySource::Extraction)
                        .await
                    {
                        Ok(outcome) => {
                            submitted += 1;
                            for event in outcome.events {
                                emitter.emit(event)?;
                            }
                        }
                        // One bad candidate (too long, a bad tag) is left out, the rest kept.
                        Err(RuntimeError::Memory(message)) => {
                            tracing::info!(%message, "A memory candidate from extraction was left out.");
                        }
                        Err(error) => {
                            failure = Some(error.to_string());
                            break;
                        }
                    }
                }
                failure.map_or(Ok(()), Err)
            }
            Err(error) => Err(error),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let terminal = match &result {
            Ok(()) => {
                let summary = format!("{submitted} candidate(s) submitted");
                record.status = RunStatus::Completed;
                record.output = Some(summary.clone());
                record.finish_reason = Some(FinishReason::Completed);
                EventPayload::RequestCompleted {
                    output: summary,
                    finish_reason: FinishReason::Completed,
                    usage: Usage::default(),
                    steps: 1,
                    duration_ms,
                }
            }
            Err(message) => {
                let error = ErrorInfo::new(ErrorCode::Internal, message.clone());
                record.status = RunStatus::Failed;
                record.error = Some(error.clone());
                record.finish_reason = Some(FinishReason::Internal);
                EventPayload::RequestFailed {
                    error,
                    finish_reason: FinishReason::Internal,
                    usage: Usage::default(),
                    steps: 1,
                    duration_ms,
                }
            }
        };
        emitter.emit_durable(terminal).await?;
        record.steps = 1;
        record.ended_at = Some(keel_types::now_rfc3339());
        record.event_count = emitter.count();
        self.store().update_run(&record).await?;
        Ok(record.request_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_or_say_what_is_wrong() {
        let drafts = parse(
            "```json\n{\"memories\": [{\"text\": \"Ana likes tea.\", \"kind\": \"preference\"}]}\n```",
            5,
        )
        .unwrap();
        assert_eq!(drafts[0].kind, MemoryKind::Preference);
        assert_eq!(parse("{\"memories\": []}", 5).unwrap(), Vec::new());
        let error = parse("Sure! Ana likes tea.", 5).unwrap_err();
        assert!(error.contains("not JSON of the form"), "{error}");
        let error = parse(
            "{\"memories\": [{\"text\": \"x\", \"kind\": \"rumour\"}]}",
            5,
        )
        .unwrap_err();
        assert!(error.starts_with("memories[0].kind"), "{error}");
        let many = "{\"memories\": [{\"text\": \"a\"}, {\"text\": \"b\"}, {\"text\": \"c\"}]}";
        assert_eq!(parse(many, 2).unwrap().len(), 2);
    }
}
