//! Span attributes: the GenAI semantic conventions' names, and Keel's `keel.*` ones
//! (`docs/observability.md` lists every one).

use keel_types::{
    ApprovalRecord, ModelParams, ModelStopReason, NodeKey, Repair, RequestId, SandboxRecord,
    ToolCall, Usage,
};
use serde_json::{Value, json};

use super::{Attributes, Span};

fn map<const N: usize>(pairs: [(&'static str, Value); N]) -> Attributes {
    Attributes::from(pairs)
}

pub(super) fn run_attributes(agent: &str, session: Option<&str>, run: &RequestId) -> Attributes {
    let mut attributes = map([
        ("gen_ai.operation.name", Value::from("invoke_agent")),
        ("gen_ai.agent.name", Value::from(agent)),
        ("keel.request_id", Value::from(run.0.as_str())),
    ]);
    if let Some(session) = session {
        attributes.insert("gen_ai.conversation.id", Value::from(session));
    }
    attributes
}

pub(super) fn tool_attributes(tool: &str, call_id: &str) -> Attributes {
    let mut attributes = map([
        ("gen_ai.operation.name", Value::from("execute_tool")),
        ("gen_ai.tool.name", Value::from(tool)),
        ("gen_ai.tool.call.id", Value::from(call_id)),
        // Keel runs the tools itself, on the agent's side (semconv: `extension`).
        ("gen_ai.tool.type", Value::from("extension")),
    ]);
    // An MCP server's tool is offered as `mcp__<prefix>__<tool>` (docs/mcp.md).
    if let Some((server, remote)) = tool
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
    {
        attributes.insert("keel.mcp.server", Value::from(server));
        attributes.insert("keel.mcp.tool", Value::from(remote));
    }
    attributes
}

/// The GenAI provider name of a Keel provider (`openai`, `anthropic`; Keel's own test and
/// replay providers keep their names).
fn provider_name(provider: &str) -> &str {
    provider
}

pub(super) fn chat_attributes(
    step: u32,
    attempt: u32,
    model: &str,
    provider: &str,
    params: &ModelParams,
) -> Attributes {
    let mut attributes = map([
        ("gen_ai.operation.name", Value::from("chat")),
        ("gen_ai.provider.name", Value::from(provider_name(provider))),
        ("gen_ai.request.model", Value::from(model)),
        ("keel.model.step", Value::from(step)),
        ("keel.model.attempt", Value::from(attempt)),
    ]);
    let mut put = |key: &'static str, value: Option<Value>| {
        if let Some(value) = value {
            attributes.insert(key, value);
        }
    };
    put(
        "gen_ai.request.temperature",
        params.temperature.map(Value::from),
    );
    put(
        "gen_ai.request.max_tokens",
        params.max_tokens.map(Value::from),
    );
    put("gen_ai.request.top_p", params.top_p.map(Value::from));
    put("gen_ai.request.seed", params.seed.map(Value::from));
    put(
        "gen_ai.request.presence_penalty",
        params.presence_penalty.map(Value::from),
    );
    put(
        "gen_ai.request.frequency_penalty",
        params.frequency_penalty.map(Value::from),
    );
    put(
        "gen_ai.request.stop_sequences",
        (!params.stop.is_empty()).then(|| Value::from(params.stop.clone())),
    );
    attributes
}

/// The semconv finish reason of a stop reason.
fn finish_reason(reason: ModelStopReason) -> &'static str {
    match reason {
        ModelStopReason::Stop => "stop",
        ModelStopReason::ToolCalls => "tool_call",
        ModelStopReason::Length => "length",
        ModelStopReason::ContentFilter => "content_filter",
        ModelStopReason::Paused => "pause_turn",
        ModelStopReason::Unknown => "unknown",
    }
}

fn usage_attributes(attributes: &mut Attributes, usage: &Usage) {
    attributes.insert(
        "gen_ai.usage.input_tokens",
        Value::from(usage.prompt_tokens),
    );
    attributes.insert(
        "gen_ai.usage.output_tokens",
        Value::from(usage.completion_tokens),
    );
    if usage.cache_read_tokens > 0 {
        attributes.insert(
            "gen_ai.usage.cache_read.input_tokens",
            Value::from(usage.cache_read_tokens),
        );
    }
    if usage.cache_write_tokens > 0 {
        attributes.insert(
            "gen_ai.usage.cache_creation.input_tokens",
            Value::from(usage.cache_write_tokens),
        );
    }
    if usage.reasoning_tokens > 0 {
        attributes.insert(
            "keel.usage.reasoning_tokens",
            Value::from(usage.reasoning_tokens),
        );
    }
    if let Some(cost) = &usage.cost {
        attributes.insert("keel.cost.amount", Value::from(cost.amount.to_string()));
        attributes.insert("keel.cost.currency", Value::from(cost.currency.as_str()));
    }
}

pub(super) fn chat_completed(span: &mut Span, stop: ModelStopReason, usage: &Usage) {
    let model = span.attributes.get("gen_ai.request.model").cloned();
    if let Some(model) = model {
        // Providers do not report another model than the one asked for (a `fallbacks` model
        // is a round of its own).
        span.attributes.insert("gen_ai.response.model", model);
    }
    span.attributes.insert(
        "gen_ai.response.finish_reasons",
        json!([finish_reason(stop)]),
    );
    usage_attributes(&mut span.attributes, usage);
}

pub(super) fn run_totals(span: &mut Span, usage: &Usage, steps: u32, finish: &str) {
    usage_attributes(&mut span.attributes, usage);
    span.attributes.insert("keel.run.steps", Value::from(steps));
    span.attributes
        .insert("keel.run.finish_reason", Value::from(finish));
}

pub(super) fn guard(span: &mut Span, decision: &str, issues: usize, repairs: &[Repair]) {
    span.attributes
        .insert("keel.gateway.decision", Value::from(decision));
    if issues > 0 {
        span.attributes
            .insert("keel.gateway.issues", Value::from(issues));
    }
    if !repairs.is_empty() {
        let kinds: Vec<Value> = repairs
            .iter()
            .map(|r| Value::from(format!("{} {}", r.kind.as_str(), r.path)))
            .collect();
        span.attributes
            .insert("keel.gateway.repairs", Value::Array(kinds));
    }
}

pub(super) fn sandbox(span: &mut Span, sandbox: &SandboxRecord) {
    let value = serde_json::to_value(sandbox).unwrap_or(Value::Null);
    for (field, key) in [
        ("filesystem", "keel.sandbox.filesystem"),
        ("network", "keel.sandbox.network"),
    ] {
        if let Some(v) = value.get(field) {
            span.attributes.insert(key, v.clone());
        }
    }
    if let Some(Value::Array(mechanisms)) = value.get("mechanisms") {
        let names: Vec<Value> = mechanisms
            .iter()
            .map(|m| {
                m.as_str()
                    .map_or_else(|| Value::from(m.to_string()), Value::from)
            })
            .collect();
        span.attributes
            .insert("keel.sandbox.mechanisms", Value::Array(names));
    }
}

pub(super) fn approval_requested(approval: &ApprovalRecord) -> Attributes {
    let mut attributes = map([
        (
            "keel.approval.id",
            Value::from(approval.approval_id.as_str()),
        ),
        ("keel.approval.tool", Value::from(approval.tool.as_str())),
        (
            "keel.approval.asked_by",
            Value::from(approval.asked_by.as_str()),
        ),
    ]);
    if let Some(reason) = &approval.ask_reason {
        attributes.insert("keel.approval.ask_reason", Value::from(reason.as_str()));
    }
    if let Some(call_id) = &approval.call_id {
        attributes.insert("gen_ai.tool.call.id", Value::from(call_id.as_str()));
    }
    attributes
}

pub(super) fn approval_resolved(
    span: &mut Span,
    status: &str,
    decided_by: Option<&str>,
    reason: Option<&str>,
) {
    span.attributes
        .insert("keel.approval.status", Value::from(status));
    if let Some(who) = decided_by {
        span.attributes
            .insert("keel.approval.decided_by", Value::from(who));
    }
    if let Some(reason) = reason {
        span.attributes
            .insert("keel.approval.reason", Value::from(reason));
    }
    if let Some(ms) = span.duration_ms() {
        span.attributes
            .insert("keel.approval.wait_ms", Value::from(ms));
    }
}

pub(super) fn hook(
    hook: &str,
    when: &str,
    outcome: Option<&str>,
    reason: Option<&str>,
    on_error: Option<&str>,
    call_id: Option<&str>,
) -> Attributes {
    let mut attributes = map([
        ("keel.hook.name", Value::from(hook)),
        ("keel.hook.event", Value::from(when)),
    ]);
    let mut put = |key: &'static str, value: Option<&str>| {
        if let Some(value) = value {
            attributes.insert(key, Value::from(value));
        }
    };
    put("keel.hook.outcome", outcome.or(on_error.map(|_| "failed")));
    put("keel.hook.reason", reason);
    put("keel.hook.on_error", on_error);
    put("gen_ai.tool.call.id", call_id);
    attributes
}

pub(super) fn compaction(
    step: u32,
    reason: &str,
    before: u64,
    after: u64,
    elided: usize,
    summarized: bool,
    summarizer: Option<&Usage>,
) -> Attributes {
    let mut attributes = map([
        ("keel.context.step", Value::from(step)),
        ("keel.context.reason", Value::from(reason)),
        ("keel.context.tokens_before", Value::from(before)),
        ("keel.context.tokens_after", Value::from(after)),
        ("keel.context.elided", Value::from(elided)),
        ("keel.context.summarized", Value::from(summarized)),
    ]);
    if let Some(usage) = summarizer {
        usage_attributes(&mut attributes, usage);
    }
    attributes
}

pub(super) fn recall(
    namespaces: &[String],
    records: usize,
    mode: &str,
    omitted: u64,
    chars: u64,
) -> Attributes {
    map([
        ("keel.memory.namespaces", Value::from(namespaces.to_vec())),
        ("keel.memory.records", Value::from(records)),
        ("keel.memory.mode", Value::from(mode)),
        ("keel.memory.omitted", Value::from(omitted)),
        ("keel.memory.chars", Value::from(chars)),
    ])
}

pub(super) fn node(
    node: &str,
    kind: &str,
    key: NodeKey,
    attempt: u32,
    child: Option<&RequestId>,
) -> Attributes {
    let mut attributes = map([
        ("keel.workflow.node", Value::from(node)),
        ("keel.workflow.node.kind", Value::from(kind)),
        ("keel.workflow.node.iteration", Value::from(key.iteration)),
        ("keel.workflow.node.attempt", Value::from(attempt)),
    ]);
    if let Some(item) = key.item {
        attributes.insert("keel.workflow.node.item", Value::from(item));
    }
    if let Some(child) = child {
        attributes.insert("keel.child.request_id", Value::from(child.0.as_str()));
    }
    attributes
}

/// The user's input as the semconv's `gen_ai.input.messages` (a JSON string).
pub(super) fn user_message(input: &str) -> String {
    json!([{"role": "user", "parts": [{"type": "text", "content": input}]}]).to_string()
}

/// An answer as the semconv's `gen_ai.output.messages` (a JSON string).
pub(super) fn assistant_message(
    content: &str,
    calls: &[ToolCall],
    stop: ModelStopReason,
) -> String {
    let mut parts = Vec::new();
    if !content.is_empty() {
        parts.push(json!({"type": "text", "content": content}));
    }
    for call in calls {
        parts.push(json!({
            "type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments,
        }));
    }
    json!([{"role": "assistant", "parts": parts, "finish_reason": finish_reason(stop)}]).to_string()
}

/// The first line of a message, for a span's status.
pub(super) fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
