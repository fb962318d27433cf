//! [`TraceBuilder`]: a run's open spans, and how a span opens and ends.

use std::collections::HashMap;

use keel_types::trace::{attempt_key, call_key, seq_key, span_id};
use keel_types::{Event, EventPayload, RequestId, RunRecord, RunTrace, SpanId};
use serde_json::Value;

use super::{Attributes, Span, SpanKind, SpanLink, SpanStatus, attrs, trace_of, unix_nanos};

/// Builds a run's spans from its events, one event at a time.
#[derive(Debug)]
pub struct TraceBuilder {
    pub(super) run: RequestId,
    pub(super) agent: String,
    pub(super) session: Option<String>,
    pub(super) trace: RunTrace,
    pub(super) capture_content: bool,
    /// The current attempt's span (the run's root span), once its first event was seen.
    pub(super) root: Option<Span>,
    /// The first attempt's span id, for a resumed attempt's link.
    pub(super) first_root: SpanId,
    /// Open spans by key (`call:<id>`, `chat`, `approval:<id>`, `node:<…>`).
    pub(super) open: HashMap<String, Span>,
    /// Keys already used by a finished span (a call run again after a resume gets another).
    pub(super) used: std::collections::HashSet<String>,
    pub(super) finished: Vec<Span>,
    /// Tool calls whose span ended, by call id (a `PostToolUse` hook after the result still
    /// belongs under its call).
    pub(super) ended_calls: HashMap<String, SpanId>,
    /// When each open tool call's last event was (a refused call ends there).
    pub(super) call_seen: HashMap<String, u64>,
    /// The time of the previous event (a compaction or recall began right after it).
    pub(super) last_nanos: u64,
    /// The time and `seq` of the event being taken in.
    pub(super) now: (u64, u64),
    /// The `seq` the log continues after (a resumed run's builder starts there).
    pub(super) continues_after: u64,
}

impl TraceBuilder {
    /// A builder for `record`'s events after `last_seq` (0: from its beginning).
    pub fn new(record: &RunRecord, last_seq: u64, capture_content: bool) -> Self {
        Self {
            run: record.request_id.clone(),
            agent: record.agent.clone(),
            session: record.session_id.as_ref().map(ToString::to_string),
            trace: trace_of(record),
            capture_content,
            root: None,
            first_root: span_id(&record.request_id, &attempt_key(1)),
            open: HashMap::new(),
            used: std::collections::HashSet::new(),
            finished: Vec::new(),
            ended_calls: HashMap::new(),
            call_seen: HashMap::new(),
            last_nanos: 0,
            now: (0, 0),
            continues_after: last_seq,
        }
    }

    /// The run's trace.
    pub fn trace(&self) -> &RunTrace {
        &self.trace
    }

    /// The spans that ended since the last call.
    pub fn take_finished(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.finished)
    }

    /// The spans still open, root last.
    pub fn into_open(mut self) -> Vec<Span> {
        let mut open: Vec<Span> = self.open.drain().map(|(_, span)| span).collect();
        open.sort_by_key(|span| span.start_unix_nanos);
        open.extend(self.root.take());
        open
    }

    /// Takes in the run's next event.
    pub fn push(&mut self, event: &Event) {
        let at = unix_nanos(&event.ts).unwrap_or(self.last_nanos);
        self.now = (at, event.seq);
        let opens_attempt = matches!(
            event.payload,
            EventPayload::RequestResumed { .. } | EventPayload::RequestForked { .. }
        );
        if self.root.is_none() && !opens_attempt {
            // The first event of a log (or of what this process sees of it) opens the attempt.
            let seq = match self.continues_after {
                0 => 1,
                _ => event.seq,
            };
            self.open_root(seq, at, None);
        }
        self.map(event, at);
        if let Some(root) = &mut self.root {
            root.seqs.push(event.seq);
        }
        self.last_nanos = at;
    }

    pub(super) fn open_root(&mut self, seq: u64, at: u64, resumed_from: Option<SpanId>) {
        let span_id = span_id(&self.run, &attempt_key(seq));
        let mut span = Span {
            trace_id: self.trace.trace_id,
            span_id,
            parent_span_id: self.trace.parent_span_id,
            remote_parent: self.trace.remote_parent,
            name: format!("invoke_agent {}", self.agent),
            kind: SpanKind::Internal,
            start_unix_nanos: at,
            end_unix_nanos: None,
            status: SpanStatus::UNSET,
            attributes: attrs::run_attributes(&self.agent, self.session.as_deref(), &self.run),
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: Vec::new(),
            sampled: self.trace.sampled,
        };
        if let Some(first) = resumed_from {
            span.links.push(SpanLink {
                trace_id: self.trace.trace_id,
                span_id: first,
                attributes: Attributes::from([("keel.link.type", Value::from("resumed_from"))]),
            });
            span.attributes
                .insert("keel.run.attempt_seq", Value::from(seq));
        }
        self.root = Some(span);
    }

    /// The span id of the current attempt (the parent of what happens in it).
    pub(super) fn root_id(&self) -> SpanId {
        self.root
            .as_ref()
            .map_or(self.first_root, |root| root.span_id)
    }

    /// Opens a span under `parent` (the root when `None`), keyed `key`.
    /// Its id is derived from `key`, or from `id_key` when the key is reused (`chat`).
    pub(super) fn open(
        &mut self,
        key: String,
        id_key: Option<String>,
        name: String,
        kind: SpanKind,
        parent: Option<SpanId>,
    ) -> &mut Span {
        let (at, seq) = self.now;
        let mut id_key = id_key.unwrap_or_else(|| key.clone());
        if self.used.contains(&id_key) {
            id_key = format!("{id_key}#{seq}");
        }
        self.used.insert(id_key.clone());
        let span = Span {
            trace_id: self.trace.trace_id,
            span_id: span_id(&self.run, &id_key),
            parent_span_id: Some(parent.unwrap_or_else(|| self.root_id())),
            remote_parent: false,
            name,
            kind,
            start_unix_nanos: at,
            end_unix_nanos: None,
            status: SpanStatus::UNSET,
            attributes: Attributes::default(),
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: vec![seq],
            sampled: self.trace.sampled,
        };
        self.open.entry(key).or_insert(span)
    }

    /// Ends the span keyed `key` at `at`.
    pub(super) fn close(&mut self, key: &str, at: u64) -> Option<&mut Span> {
        let mut span = self.open.remove(key)?;
        span.end_unix_nanos = Some(at.max(span.start_unix_nanos));
        if let Some(call_id) = key.strip_prefix("call:") {
            self.ended_calls.insert(call_id.to_owned(), span.span_id);
            self.call_seen.remove(key);
        }
        self.finished.push(span);
        self.finished.last_mut()
    }

    /// A span that both starts and ends with what one event says (a hook, a compaction).
    /// It ends now (the current event); `start` is when it began.
    pub(super) fn whole(
        &mut self,
        name: String,
        start: u64,
        parent: Option<SpanId>,
        attributes: Attributes,
        status: SpanStatus,
    ) {
        let (end, seq) = self.now;
        let span = Span {
            trace_id: self.trace.trace_id,
            span_id: span_id(&self.run, &seq_key("event", seq)),
            parent_span_id: Some(parent.unwrap_or_else(|| self.root_id())),
            remote_parent: false,
            name,
            kind: SpanKind::Internal,
            start_unix_nanos: start.min(end),
            end_unix_nanos: Some(end),
            status,
            attributes,
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: vec![seq],
            sampled: self.trace.sampled,
        };
        self.finished.push(span);
    }

    /// The open span of a tool call (opened by the first event naming it).
    pub(super) fn call(&mut self, call_id: &str, tool: &str) -> Option<&mut Span> {
        let (at, seq) = self.now;
        let key = call_key(call_id);
        self.call_seen.insert(key.clone(), at);
        if let Some(span) = self.open.get_mut(&key) {
            span.seqs.push(seq);
        } else {
            let span = self.open(
                key.clone(),
                None,
                format!("execute_tool {tool}"),
                SpanKind::Internal,
                None,
            );
            span.attributes = attrs::tool_attributes(tool, call_id);
        }
        self.open.get_mut(&key)
    }

    /// The span a call's hook or approval sits under: the call's, or the attempt's.
    pub(super) fn parent_of_call(&self, call_id: Option<&str>) -> Option<SpanId> {
        let call_id = call_id?;
        self.open
            .get(&call_key(call_id))
            .map(|span| span.span_id)
            .or_else(|| self.ended_calls.get(call_id).copied())
    }

    /// Notes that an open call's span reaches to now (its hook ran, its approval was decided).
    pub(super) fn touch_call(&mut self, call_id: Option<&str>) {
        let Some(call_id) = call_id else { return };
        let key = call_key(call_id);
        if self.open.contains_key(&key) {
            self.call_seen.insert(key, self.now.0);
        }
    }

    /// Ends the calls that never started (blocked by the gateway, denied by a policy, a hook
    /// or a person): they end with their last event, refused. Done when the next round starts
    /// and when the run ends.
    pub(super) fn end_refused_calls(&mut self) {
        let refused: Vec<(String, u64)> = self
            .open
            .iter()
            .filter(|(key, span)| {
                key.starts_with("call:") && !span.attributes.contains_key("keel.tool.started")
            })
            .map(|(key, span)| {
                let at = self
                    .call_seen
                    .get(key)
                    .copied()
                    .unwrap_or(span.start_unix_nanos);
                (key.clone(), at)
            })
            .collect();
        for (key, at) in refused {
            if let Some(span) = self.close(&key, at)
                && span.status.code != "error"
            {
                span.status = SpanStatus::error("the call was refused and did not run");
                span.attributes.insert_absent("error.type", "refused");
            }
        }
    }
    /// Ends every open span of the attempt and the attempt itself.
    pub(super) fn end_attempt(&mut self, at: u64, status: SpanStatus) {
        let at = if self.last_nanos > 0 {
            self.last_nanos.min(at)
        } else {
            at
        };
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for key in keys {
            if let Some(span) = self.close(&key, at)
                && span.status.code != "error"
            {
                span.status = status.clone();
            }
        }
        if let Some(mut root) = self.root.take() {
            root.end_unix_nanos = Some(at.max(root.start_unix_nanos));
            root.status = status;
            self.finished.push(root);
        }
    }

    pub(super) fn end_run(
        &mut self,
        usage: &keel_types::Usage,
        steps: u32,
        finish: &str,
        status: SpanStatus,
        output: Option<&str>,
    ) {
        self.end_refused_calls();
        let (at, seq) = self.now;
        if let Some(root) = &mut self.root {
            root.seqs.push(seq);
            attrs::run_totals(root, usage, steps, finish);
            if let Some(output) = output {
                root.attributes.insert(
                    "gen_ai.output.messages",
                    Value::from(attrs::assistant_message(
                        output,
                        &[],
                        keel_types::ModelStopReason::Stop,
                    )),
                );
            }
        }
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for key in keys {
            if let Some(span) = self.close(&key, at) {
                span.status = SpanStatus::error("the run ended before it did");
            }
        }
        if let Some(mut root) = self.root.take() {
            root.end_unix_nanos = Some(at.max(root.start_unix_nanos));
            root.status = status;
            self.finished.push(root);
        }
    }
}
