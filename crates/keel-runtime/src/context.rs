//! Context-window management, the parts that need no run: estimating a prompt's size,
//! finding a conversation's rounds, and the edits compaction makes (eliding tool results,
//! putting a summary in the place of the oldest rounds), applied the same way by a live run
//! and by a resumed one rebuilding its prompt from `runtime.context.compacted` records.
//!
//! Sizes are counted with the model's tokenizer: OpenAI's encodings (`o200k_base`,
//! `cl100k_base`, by the `bpe-openai` crate) where the model is of that family and its window
//! is managed, else a documented heuristic — 4 bytes of UTF-8 a token (what OpenAI's and
//! Anthropic's tokenizers average on English prose and code). Either way a message adds 4
//! tokens for its framing and tool definitions count by their JSON. Each message is counted
//! once ([`TokenCounter`]), so a round costs what it added, however long the conversation.

use std::sync::Arc;

use futures_util::StreamExt;
use keel_types::{Message, ModelEvent, ModelParams, ModelProvider, ModelRequest, Role, Usage};
use keel_workspace::TokenizerSpec;

/// What a summarizer is asked to do.
pub(crate) const SUMMARIZE: &str = "You compact the working memory of an AI agent that is in the \
     middle of a task. Summarize the conversation rounds below: what was asked, what the agent \
     did, and every fact, number, name, path, identifier and result it found that the rest of \
     the task may need. Keep exact values exactly. Write plain text, no preamble.";
/// The longest piece of one message a summarizer reads.
pub(crate) const TRANSCRIPT_CHARS: usize = 4_000;

/// A summary of `messages` by `provider`: its text and usage (no cost), or why there is none
/// (the model failed, or answered nothing).
pub(crate) async fn summarize(
    provider: &dyn ModelProvider,
    messages: &[Message],
) -> Result<(String, Usage), String> {
    let request = ModelRequest {
        messages: vec![
            Message::system(SUMMARIZE),
            Message::user(transcript(messages, TRANSCRIPT_CHARS)),
        ],
        tools: Arc::from(Vec::new()),
        params: ModelParams::default(),
        stream: false,
        sections: Vec::new(),
        traceparent: None,
    };
    let failed = |e: keel_types::ModelError| format!("the summarizer failed: {e}");
    let mut stream = provider.stream(request).await.map_err(failed)?;
    let (mut text, mut usage) = (String::new(), Usage::default());
    while let Some(event) = stream.next().await {
        match event.map_err(failed)? {
            ModelEvent::TextDelta { text: more } => text.push_str(&more),
            ModelEvent::Usage { usage: counted } => usage = counted,
            ModelEvent::Stop { .. } => break,
            _ => {}
        }
    }
    match text.trim() {
        "" => Err("the summarizer answered nothing".into()),
        text => Ok((text.to_owned(), usage)),
    }
}

/// Tokens added per message for its role and framing.
const PER_MESSAGE: u64 = 4;
/// Bytes per token.
const BYTES_PER_TOKEN: u64 = 4;
/// A tool result this long or shorter is left as it is: a stub would not be shorter.
const ELIDE_ABOVE: usize = 240;
/// How a summary message begins.
pub(crate) const SUMMARY_HEADING: &str =
    "[Summary of the earlier rounds of this run, written to fit the context window]";
/// How an elided result begins.
const STUB_HEADING: &str = "[elided to fit the context window:";

pub(crate) fn tokens_of_bytes(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Counts a prompt's tokens with one tokenizer, remembering each message's count by its
/// place in the prompt, so a message is counted once however many rounds it stays there
/// (what a round adds is all that is tokenized). Whoever edits the prompt other than by
/// appending calls [`TokenCounter::forget`].
#[derive(Debug, Clone, Default)]
pub struct TokenCounter {
    tokenizer: Tokenizer,
    /// Per message of the prompt, in order: its length in bytes when counted, and its tokens.
    counts: Vec<(usize, u64)>,
}

/// What a prompt's tokens are counted with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tokenizer {
    /// 4 bytes of UTF-8 a token.
    #[default]
    Heuristic,
    /// OpenAI's `o200k_base`.
    O200kBase,
    /// OpenAI's `cl100k_base`.
    Cl100kBase,
}

impl Tokenizer {
    /// The tokenizer a model declares (or `auto` resolves to).
    pub fn of(model: &keel_workspace::ModelSpec) -> Self {
        match model.tokenizer() {
            TokenizerSpec::O200kBase => Self::O200kBase,
            TokenizerSpec::Cl100kBase => Self::Cl100kBase,
            TokenizerSpec::Heuristic | TokenizerSpec::Auto => Self::Heuristic,
        }
    }

    /// Tokens of `text`. An encoding's tables load on first use, once per process.
    pub fn count(self, text: &str) -> u64 {
        match self {
            Self::Heuristic => tokens_of_bytes(text.len()),
            Self::O200kBase => bpe_openai::o200k_base().count(text) as u64,
            Self::Cl100kBase => bpe_openai::cl100k_base().count(text) as u64,
        }
    }

    /// Tokens of one message: its text, its tool calls' names and arguments, its framing.
    pub fn message(self, message: &Message) -> u64 {
        let calls: u64 = message
            .tool_calls
            .iter()
            .map(|c| self.count(&c.name) + self.count(&c.arguments))
            .sum();
        self.count(&message.content) + calls + PER_MESSAGE
    }

    /// Tokens of `messages`, none remembered.
    pub fn messages(self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.message(m)).sum()
    }
}

fn message_bytes(message: &Message) -> usize {
    message.content.len()
        + message
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>()
}

impl TokenCounter {
    pub fn new(tokenizer: Tokenizer) -> Self {
        Self {
            tokenizer,
            counts: Vec::new(),
        }
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// Forgets every count: the prompt was edited in place.
    pub fn forget(&mut self) {
        self.counts.clear();
    }

    /// Tokens of `prompt[start..end]`, counting only messages not counted before (or whose
    /// length changed since).
    pub fn span(&mut self, prompt: &[Message], start: usize, end: usize) -> u64 {
        let end = end.min(prompt.len());
        if self.counts.len() < end {
            self.counts.resize(end, (usize::MAX, 0));
        }
        let tokenizer = self.tokenizer;
        (start..end)
            .map(|i| {
                let bytes = message_bytes(&prompt[i]);
                let slot = &mut self.counts[i];
                if slot.0 != bytes {
                    *slot = (bytes, tokenizer.message(&prompt[i]));
                }
                slot.1
            })
            .sum()
    }

    /// A prompt's estimated size: `measured`, the last round's prompt as the provider counted
    /// it (the messages it held, its prompt tokens), plus the count of what was added since,
    /// and never less than the count of the whole (`prompt` with tool definitions counted at
    /// `tools_tokens`).
    pub fn prompt_estimate(
        &mut self,
        prompt: &[Message],
        tools_tokens: u64,
        measured: Option<(usize, u64)>,
    ) -> u64 {
        let whole = self.span(prompt, 0, prompt.len()) + tools_tokens;
        match measured {
            Some((len, counted)) if len <= prompt.len() && counted > 0 => {
                whole.max(counted + self.span(prompt, len, prompt.len()))
            }
            _ => whole,
        }
    }
}

/// Estimated tokens of `messages` by the heuristic.
pub fn estimate(messages: &[Message]) -> u64 {
    Tokenizer::Heuristic.messages(messages)
}

/// Where each round of `rounds` (the messages after the input) begins: at an assistant
/// message, whose tool results follow it. Anything before the first (a summary) is a round
/// of its own.
pub(crate) fn round_starts(rounds: &[Message]) -> Vec<usize> {
    let mut starts: Vec<usize> = rounds
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, _)| i)
        .collect();
    if !rounds.is_empty() && starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts
}

/// Where the rounds kept word for word begin: the start of the `keep` last rounds (the end
/// when `keep` is 0, the start when there are no more).
pub(crate) fn kept_from(rounds: &[Message], keep: usize) -> usize {
    let starts = round_starts(rounds);
    match starts.len().checked_sub(keep) {
        Some(at) if at < starts.len() => starts[at],
        Some(_) => rounds.len(),
        None => 0,
    }
}

/// The stub that stands for an elided result.
pub(crate) fn stub(call_id: &str, bytes: usize) -> String {
    format!(
        "{STUB_HEADING} the {bytes}-byte result of call `{call_id}` is in this run's log (its agent.tool.result event)]"
    )
}

/// Replaces the long tool results of `rounds[..before]` with stubs; the calls elided, each
/// with the text it had (a summary made later reads that, not the stub).
pub(crate) fn elide(rounds: &mut [Message], before: usize) -> Vec<(String, String)> {
    let mut elided = Vec::new();
    for message in rounds.iter_mut().take(before) {
        if message.role != Role::Tool
            || message.content.len() <= ELIDE_ABOVE
            || message.content.starts_with(STUB_HEADING)
        {
            continue;
        }
        let id = message.tool_call_id.clone().unwrap_or_default();
        let stubbed = stub(&id, message.content.len());
        elided.push((id, std::mem::replace(&mut message.content, stubbed)));
    }
    elided
}

/// Replaces the results of calls `ids` with stubs, as a recorded compaction did; the texts
/// they had, by call.
pub(crate) fn apply_elided(rounds: &mut [Message], ids: &[String]) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for message in rounds.iter_mut().filter(|m| m.role == Role::Tool) {
        let id = message.tool_call_id.as_deref().unwrap_or_default();
        if ids.iter().any(|e| e == id) && !message.content.starts_with(STUB_HEADING) {
            let stubbed = stub(id, message.content.len());
            texts.push((
                id.to_owned(),
                std::mem::replace(&mut message.content, stubbed),
            ));
        }
    }
    texts
}

/// `rounds` with each elided result's text back (from `texts`, by call), for a summarizer to
/// read.
pub(crate) fn with_elided_texts(
    rounds: &[Message],
    texts: &std::collections::HashMap<String, String>,
) -> Vec<Message> {
    rounds
        .iter()
        .map(
            |m| match m.tool_call_id.as_deref().and_then(|id| texts.get(id)) {
                Some(text) if m.role == Role::Tool => Message {
                    content: text.clone(),
                    ..m.clone()
                },
                _ => m.clone(),
            },
        )
        .collect()
}

/// The message a summary stands in.
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::user(format!("{SUMMARY_HEADING}\n{}", summary.trim()))
}

/// Puts `summary` in the place of `rounds[from..to]`, as a compaction did (indices out of
/// range are clamped: a log is never trusted to be in bounds).
pub(crate) fn apply_summary(rounds: &mut Vec<Message>, [from, to]: [u32; 2], summary: &str) {
    let to = (to as usize).min(rounds.len());
    let from = (from as usize).min(to);
    rounds.splice(from..to, [summary_message(summary)]);
}

/// The rounds a summarizer reads, as plain text: each message by role, calls with their
/// arguments, each cut at `max_chars`.
pub(crate) fn transcript(rounds: &[Message], max_chars: usize) -> String {
    let cut = |text: &str| -> String {
        match text.char_indices().nth(max_chars) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text.to_owned(),
        }
    };
    let mut out = String::new();
    for message in rounds {
        let who = match message.role {
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
            Role::User => "user",
            Role::System => "system",
        };
        if !message.content.is_empty() {
            out.push_str(&format!("{who}: {}\n", cut(&message.content)));
        }
        for call in &message.tool_calls {
            out.push_str(&format!(
                "assistant called {}({}) [call {}]\n",
                call.name,
                cut(&call.arguments),
                call.id
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use keel_types::ToolCall;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
        }
    }

    fn rounds() -> Vec<Message> {
        vec![
            Message::assistant("", vec![call("1"), call("2")]),
            Message::tool_result("1", "x".repeat(1000)),
            Message::tool_result("2", "short"),
            Message::assistant("", vec![call("3")]),
            Message::tool_result("3", "y".repeat(1000)),
            Message::assistant("", vec![call("4")]),
            Message::tool_result("4", "z".repeat(1000)),
        ]
    }

    #[test]
    fn rounds_begin_at_answers_and_keep_their_results() {
        let rounds = rounds();
        assert_eq!(round_starts(&rounds), [0, 3, 5]);
        assert_eq!(kept_from(&rounds, 1), 5);
        assert_eq!(kept_from(&rounds, 2), 3);
        assert_eq!(kept_from(&rounds, 9), 0);
        assert_eq!(kept_from(&rounds, 0), rounds.len());
        let with_summary = [summary_message("s"), rounds[3].clone(), rounds[4].clone()];
        assert_eq!(round_starts(&with_summary), [0, 1]);
    }

    #[test]
    fn eliding_leaves_short_and_recent_results_and_a_rebuild_does_the_same() {
        let mut live = rounds();
        let kept = kept_from(&live, 1);
        let elided = elide(&mut live, kept);
        let ids: Vec<&str> = elided.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["1", "3"]);
        assert_eq!(elided[0].1, "x".repeat(1000), "the text it had");
        let texts = elided.iter().cloned().collect();
        assert_eq!(with_elided_texts(&live, &texts)[1], rounds()[1]);
        assert_eq!(live[2].content, "short");
        assert_eq!(
            live[6].content.len(),
            1000,
            "the kept round is word for word"
        );
        assert_eq!(
            live[1].content,
            "[elided to fit the context window: the 1000-byte result of call `1` is in this run's log (its agent.tool.result event)]"
        );
        assert_eq!(elide(&mut live, 7).len(), 1, "a stub is never elided again");

        let mut rebuilt = rounds();
        let texts = apply_elided(&mut rebuilt, &["1".into(), "3".into(), "4".into()]);
        assert_eq!(rebuilt, live);
        assert_eq!(texts.len(), 3);
    }

    #[test]
    fn a_summary_takes_the_place_of_whole_rounds() {
        let mut rounds = rounds();
        apply_summary(&mut rounds, [0, 5], "Read three files.");
        assert_eq!(rounds.len(), 3);
        assert_eq!(rounds[0].role, Role::User);
        assert!(rounds[0].content.ends_with("\nRead three files."));
        assert_eq!(rounds[1].tool_calls[0].id, "4");
        // A log out of bounds is clamped, never a panic.
        apply_summary(&mut rounds, [7, 99], "more");
        assert_eq!(rounds.len(), 4);
    }

    #[test]
    fn the_estimate_counts_characters_and_framing() {
        let messages = [
            Message::user("abcd".repeat(25)),
            Message::assistant("", vec![call("1")]),
        ];
        // 100 bytes → 25 + 4; "read_file" + 16 bytes → 7 + 4.
        assert_eq!(estimate(&messages), 40);
        assert!(transcript(&messages, 10).contains("abcdabcdab…"));
    }

    #[test]
    fn openai_encodings_count_tokens_not_bytes() {
        // "Hello" "," " world" "!" in both encodings.
        assert_eq!(Tokenizer::O200kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::Cl100kBase.count("Hello, world!"), 4);
        // A long run of one letter takes several bytes a token, not the heuristic's four.
        let same = "a".repeat(4000);
        assert!(Tokenizer::O200kBase.count(&same) < 1000);
        assert_eq!(Tokenizer::Heuristic.count(&same), 1000);
    }

    #[test]
    fn the_counter_counts_what_was_added_and_recounts_what_changed() {
        let mut prompt = vec![
            Message::system("Be brief."),
            Message::user("abcd".repeat(25)),
        ];
        let mut counter = TokenCounter::new(Tokenizer::Heuristic);
        // 9 bytes → 3 + 4; 100 bytes → 25 + 4.
        assert_eq!(counter.prompt_estimate(&prompt, 10, None), 7 + 29 + 10);
        // The provider counted 50 for the first two; a result of 40 bytes came since.
        prompt.push(Message::tool_result("1", "x".repeat(40)));
        assert_eq!(counter.prompt_estimate(&prompt, 10, Some((2, 50))), 50 + 14);
        // Never less than the whole's count.
        assert_eq!(
            counter.prompt_estimate(&prompt, 10, Some((2, 5))),
            7 + 29 + 14 + 10
        );
        // A message edited in place is counted again.
        prompt[2].content = "x".repeat(400);
        assert_eq!(counter.span(&prompt, 2, 3), 104);
        // A count beyond the prompt stops at its end.
        assert_eq!(counter.span(&prompt, 0, 99), 7 + 29 + 104);
    }
}
