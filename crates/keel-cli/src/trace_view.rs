//! `keel runs show ID --trace`: a run's spans (and those of the runs it started) as a text
//! waterfall, computed from the stored events like `GET /api/requests/{id}/trace`.

use std::collections::HashMap;

use keel::trace::Span;
use keel_types::{RequestId, RunStore};
use serde_json::{Value, json};

use crate::error::CliError;
use crate::out;

/// Width of the bars, in characters.
const BAR: usize = 32;

/// The spans of `id`'s run tree, ordered by start.
async fn spans(store: &dyn RunStore, id: &RequestId) -> Result<(String, Vec<Span>), CliError> {
    let tree = keel::run_tree(store, id)
        .await?
        .ok_or_else(|| CliError::failed(format!("no run `{id}`")))?;
    let trace_id = keel::trace::trace_of(&tree.run).trace_id.to_string();
    let mut spans = Vec::new();
    let mut pending = vec![tree];
    while let Some(node) = pending.pop() {
        let events = store.events(&node.run.request_id, 0).await?;
        spans.extend(keel::trace::spans_of(&node.run, &events, false));
        pending.extend(node.children);
    }
    spans.sort_by_key(|span| span.start_unix_nanos);
    Ok((trace_id, spans))
}

pub(crate) async fn show(store: &dyn RunStore, id: &RequestId, json: bool) -> Result<(), CliError> {
    let (trace_id, spans) = spans(store, id).await?;
    if json {
        let view = json!({"requestId": id, "traceId": trace_id, "spans": spans});
        out::line(&serde_json::to_string_pretty(&view)?);
        return Ok(());
    }
    out::line(&format!("trace {trace_id}"));
    for line in waterfall(&spans) {
        out::line(&line);
    }
    Ok(())
}

/// One line per span, children under their parent, each with a bar on the run's time axis.
pub(crate) fn waterfall(spans: &[Span]) -> Vec<String> {
    let Some(start) = spans.iter().map(|s| s.start_unix_nanos).min() else {
        return Vec::new();
    };
    let end = spans
        .iter()
        .map(|s| s.end_unix_nanos.unwrap_or(s.start_unix_nanos))
        .max()
        .unwrap_or(start);
    let total = end.saturating_sub(start).max(1);
    let ids: HashMap<_, _> = spans.iter().map(|s| (s.span_id, ())).collect();
    let mut children: HashMap<_, Vec<&Span>> = HashMap::new();
    let mut roots = Vec::new();
    for span in spans {
        match span.parent_span_id.filter(|p| ids.contains_key(p)) {
            Some(parent) => children.entry(parent).or_default().push(span),
            None => roots.push(span),
        }
    }
    let width = spans
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0)
        .min(40)
        + 8;
    let mut lines = Vec::new();
    let mut stack: Vec<(&Span, usize)> = roots.into_iter().rev().map(|s| (s, 0)).collect();
    while let Some((span, depth)) = stack.pop() {
        let label = format!("{}{}", "  ".repeat(depth), span.name);
        let from = offset(span.start_unix_nanos - start, total);
        let to = offset(span.end_unix_nanos.unwrap_or(end) - start, total).max(from + 1);
        let bar = format!(
            "{}{}{}",
            " ".repeat(from),
            "█".repeat(to - from),
            " ".repeat(BAR.saturating_sub(to))
        );
        let duration = match span.duration_ms() {
            Some(ms) => format!("{ms:>7} ms"),
            None => "   open   ".to_owned(),
        };
        lines.push(
            format!("{label:<width$} |{bar}| {duration}  {}", detail(span))
                .trim_end()
                .to_owned(),
        );
        if let Some(kids) = children.get(&span.span_id) {
            stack.extend(kids.iter().rev().map(|kid| (*kid, depth + 1)));
        }
    }
    lines
}

fn offset(nanos: u64, total: u64) -> usize {
    usize::try_from(u128::from(nanos) * BAR as u128 / u128::from(total))
        .unwrap_or(BAR)
        .min(BAR)
}

/// What a span's line says besides its name: tokens, verdicts, decisions, errors.
fn detail(span: &Span) -> String {
    let a = &span.attributes;
    let text = |key: &str| a.get(key).and_then(Value::as_str);
    let mut parts = Vec::new();
    if let (Some(i), Some(o)) = (
        a.get("gen_ai.usage.input_tokens"),
        a.get("gen_ai.usage.output_tokens"),
    ) {
        parts.push(format!("{i} in / {o} out tokens"));
    }
    if let (Some(amount), Some(currency)) = (text("keel.cost.amount"), text("keel.cost.currency")) {
        parts.push(format!("{amount} {currency}"));
    }
    for (key, label) in [
        ("keel.gateway.decision", "gateway"),
        ("keel.policy.decision", "policy"),
        ("keel.hook.outcome", "hook"),
        ("keel.approval.status", "approval"),
        ("keel.approval.decided_by", "by"),
        ("keel.workflow.node.state", "node"),
        ("keel.context.reason", "compaction"),
    ] {
        if let Some(value) = text(key) {
            parts.push(format!("{label}: {value}"));
        }
    }
    if span.status.code == "error" {
        parts.push(format!(
            "error: {}",
            span.status.message.as_deref().unwrap_or("")
        ));
    }
    parts.join(", ")
}
