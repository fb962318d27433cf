//! The built-in `template` narrator: turns stored events into short human-readable progress
//! lines (`runtime.progress.narration`). Narration is a derived view — shown live, never
//! stored — and each line names the event it came from.
//!
//! It is also the one place that describes events to a person: [`render`] turns an event into
//! a line in a [`Style`] — the live narration (concise or verbose) or the one-line `summary`
//! `keel runs events` prints ([`Narrator::summary`]). A new event is described here, nowhere else.

mod summary;

use keel_types::{AdapterEvent, Event, EventPayload, GuardDecision, SkillReason};
use keel_workspace::{NarrationSpec, NarrationStyle};

/// The `provider` of every narration line: Keel's built-in template narrator.
pub const PROVIDER: &str = "template";

/// How an event is described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Live narration: a sentence for the events worth telling.
    Concise,
    /// Live narration that also tells the model's answers and the gateway's passes.
    Verbose,
    /// One line for every event, field by field (`keel runs events`).
    Summary,
}

/// The line describing `event` in `style`; `None` when the style has nothing to say about it
/// (narration skips most events; every event has a summary).
pub fn render(event: &Event, style: Style) -> Option<String> {
    match style {
        Style::Summary => Some(summary::line(event)),
        Style::Concise => narrate(event, false),
        Style::Verbose => narrate(event, true),
    }
}

/// Produces narration for events.
#[derive(Debug, Clone)]
pub struct Narrator {
    enabled: bool,
    verbose: bool,
}

impl Narrator {
    /// A narrator configured by `Runtime.spec.progress.narration`.
    pub fn new(spec: &NarrationSpec) -> Self {
        Self {
            enabled: spec.enabled,
            verbose: spec.style == NarrationStyle::Verbose,
        }
    }

    /// The `style` its lines carry: `concise` or `verbose`, as configured.
    pub fn style(&self) -> &'static str {
        if self.verbose { "verbose" } else { "concise" }
    }

    /// The derived `runtime.progress.narration` event of `event`, if it deserves one: it
    /// carries its source's `seq`, type and id.
    pub fn narration_of(&self, event: &Event) -> Option<Event> {
        let text = self.narrate(event)?;
        Some(Event {
            id: keel_types::EventId::generate(),
            seq: event.seq,
            ts: event.ts.clone(),
            request_id: event.request_id.clone(),
            session_id: event.session_id.clone(),
            agent_id: event.agent_id.clone(),
            payload: EventPayload::Narration {
                text,
                provider: PROVIDER.to_owned(),
                source_event_types: vec![event.type_name().to_owned()],
                source_event_ids: vec![event.id.clone()],
                style: self.style().to_owned(),
            },
        })
    }

    /// The narration line for an event, if it deserves one.
    pub fn narrate(&self, event: &Event) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let style = if self.verbose {
            Style::Verbose
        } else {
            Style::Concise
        };
        render(event, style)
    }

    /// The one-line `summary` of any event (the [`Style::Summary`] of [`render`]), as
    /// `keel runs events` prints it; whether narration is enabled does not matter.
    pub fn summary(event: &Event) -> String {
        summary::line(event)
    }
}

/// The narration line for an event in the concise or `verbose` style, if it deserves one.
fn narrate(event: &Event, verbose: bool) -> Option<String> {
    let line = match &event.payload {
        EventPayload::RequestStarted { .. } => {
            format!(
                "Started {} with agent {}.",
                event.request_id, event.agent_id
            )
        }
        EventPayload::ModelStarted {
            step,
            attempt,
            model,
            ..
        } => match (step, attempt) {
            (1, 1) => format!("Asking {model}…"),
            (_, 1) => format!("Asking {model} again (step {step})…"),
            _ => format!("Asking {model} (step {step}, attempt {attempt})…"),
        },
        EventPayload::ModelCompleted {
            tool_calls, usage, ..
        } if verbose => format!(
            "Model answered with {} tool call(s), {} tokens.",
            tool_calls.len(),
            usage.total_tokens
        ),
        EventPayload::ModelRetry {
            attempt,
            error,
            delay_ms,
            ..
        } => format!(
            "Model attempt {attempt} failed ({}); retrying in {}.",
            error.message,
            seconds(*delay_ms)
        ),
        EventPayload::ModelFallback {
            from, to, reason, ..
        } => format!("{from} failed ({}); asking {to} instead.", reason.message),
        EventPayload::ToolGuard {
            tool,
            decision: GuardDecision::Blocked,
            issues,
            ..
        } => {
            let first = issues
                .first()
                .map(|i| format!(": {}", i.message))
                .unwrap_or_default();
            // Its caller — the model, or whoever called the tool directly — gets the issues.
            format!(
                "Blocked a call to {tool} ({} issue(s){first}); the caller is told why.",
                issues.len()
            )
        }
        EventPayload::ToolGuard { tool, decision, .. } if verbose => {
            format!("gateway {decision} the call to {tool}.")
        }
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                tool, arguments, ..
            },
        } => format!("Running {tool} {}…", short(&arguments.to_string(), 80)),
        EventPayload::Adapter {
            event:
                AdapterEvent::ToolResult {
                    tool,
                    ok,
                    output,
                    duration_ms,
                    ..
                },
        } => match ok {
            true => format!("{tool} finished in {}.", millis(*duration_ms)),
            false => format!(
                "{tool} failed after {}: {}",
                millis(*duration_ms),
                short(output, 120)
            ),
        },
        EventPayload::SkillInjected {
            skill,
            reason,
            truncated,
            ..
        } => format!(
            "Using skill {skill} ({}){}.",
            match reason {
                SkillReason::AlwaysOn => "always on",
                SkillReason::Mention => "mentioned",
                SkillReason::Tool => "loaded by the model",
            },
            if *truncated {
                ", cut to its budget"
            } else {
                ""
            }
        ),
        EventPayload::SkillOffered { omitted, .. } if !omitted.is_empty() => format!(
            "{} skill(s) left out of the catalogue for lack of space: {}.",
            omitted.len(),
            short(&omitted.join(", "), 120)
        ),
        EventPayload::ContractFailed { missing_tools, .. } => format!(
            "The answer breaks the execution contract: required tool(s) not called successfully: {}.",
            missing_tools.join(", ")
        ),
        EventPayload::RequestCompleted {
            steps,
            usage,
            duration_ms,
            ..
        } => format!(
            "Completed in {} ({steps} step(s), {} tokens).",
            millis(*duration_ms),
            usage.total_tokens
        ),
        EventPayload::RequestFailed { error, .. } => format!("Failed: {}.", error.message),
        EventPayload::DirectStarted { tool, task_id, .. } => match task_id {
            Some(task) => format!("Running task {task} ({tool})…"),
            None => format!("Calling {tool} directly…"),
        },
        // A direct call's end says nothing new: the tool's result, its block, the policy
        // or the approval that refused it, and the run's end are each narrated already.
        EventPayload::DirectCompleted { .. } => return None,
        EventPayload::ApprovalRequested { approval } => format!(
            "Waiting for approval of {} {} (keel approvals approve {}).",
            approval.tool, approval.arguments, approval.approval_id
        ),
        EventPayload::ApprovalResolved {
            status, decided_by, ..
        } => format!(
            "Approval {} by {}.",
            status.as_str(),
            decided_by.as_deref().unwrap_or("timeout")
        ),
        EventPayload::PolicyDecided {
            tool,
            decision,
            source,
            ..
        } => format!("Policy: {decision} {tool} ({source})."),
        EventPayload::HookFailed { hook, error, .. } => format!("Hook {hook} failed: {error}"),
        EventPayload::ArtifactCreated { artifact, .. } => format!(
            "Stored {} ({} bytes) as {}.",
            artifact.name, artifact.bytes, artifact.uri
        ),
        EventPayload::RequestCancelled { .. } => "Cancelled.".to_owned(),
        EventPayload::RequestResumed {
            reissued_round,
            rerun_calls,
            abandoned_calls,
        } => {
            let mut line = format!("Resumed {}", event.request_id);
            if *reissued_round {
                line.push_str("; the interrupted model round is asked again");
            }
            if !rerun_calls.is_empty() {
                line.push_str(&format!("; re-running {} tool call(s)", rerun_calls.len()));
            }
            if !abandoned_calls.is_empty() {
                line.push_str(&format!(
                    "; {} interrupted tool call(s) are not re-run (not idempotent)",
                    abandoned_calls.len()
                ));
            }
            line.push('.');
            line
        }
        EventPayload::RequestForked {
            from_request_id,
            at_seq,
        } => format!("Forked from {from_request_id} at event {at_seq}."),
        EventPayload::Adapter {
            event: AdapterEvent::Handoff { agent, .. },
        } => format!("Delegating to {agent}…"),
        EventPayload::OutputRejected {
            attempt, issues, ..
        } => format!(
            "The answer does not match the output schema ({} issue(s)); asking again (attempt {}).",
            issues.len(),
            attempt + 1
        ),
        EventPayload::WorkflowStarted(started) => {
            format!("Running workflow {}…", started.workflow)
        }
        EventPayload::NodeStarted(started) => match started.key.item {
            Some(item) => format!("Node {} item {item} ({})…", started.node, started.kind),
            None => format!("Node {} ({})…", started.node, started.kind),
        },
        EventPayload::NodeFailed(failed) => format!(
            "Node {} failed: {}{}",
            failed.node,
            failed.error,
            if failed.will_retry { " (retrying)" } else { "" }
        ),
        EventPayload::NodeSkipped(skipped) => format!("Skipped {}.", skipped.node),
        EventPayload::WorkflowFailed(failed) => {
            format!("Workflow {} failed: {}", failed.workflow, failed.error)
        }
        EventPayload::PhaseVerified(phase) => format!("Phase {} verified.", phase.phase),
        EventPayload::PhaseBlocked(phase) => format!(
            "Phase {} blocked: {}",
            phase.phase,
            phase.reason.as_deref().unwrap_or("its gate refused")
        ),
        _ => return None,
    };
    Some(line)
}

fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        seconds(ms)
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}
