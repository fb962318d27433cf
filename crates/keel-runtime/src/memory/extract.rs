//! Post-run extraction (`write-after-run`): after a writer's run completes, a `Memory`
//! document's `extraction.model` is asked for candidates from the conversation, and each is
//! decided by the write policy like a `remember` call. It runs as a run of its own (agent
//! `memory`, linked to the run as its parent), in the background: the run's answer has been
//! delivered before it starts. This module is the model's side (instructions, asking,
//! reading the answer); the run is recorded by the kernel (`kernel/memory_runs.rs`).

use std::collections::BTreeMap;

use futures_util::StreamExt;
use keel_types::{
    MemoryKind, Message, ModelEvent, ModelParams, ModelProvider, ModelRequest, RunRecord,
};
use serde::Deserialize;

use super::Draft;

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
pub(crate) fn instructions(max: u32) -> String {
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
pub(crate) fn parse(answer: &str, max: u32) -> Result<Vec<Draft>, String> {
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
pub(crate) async fn ask(
    provider: &dyn ModelProvider,
    messages: Vec<Message>,
) -> Result<String, String> {
    let request = ModelRequest {
        messages,
        tools: std::sync::Arc::from([]),
        params: ModelParams::default(),
        stream: false,
        sections: Vec::new(),
        traceparent: None,
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
