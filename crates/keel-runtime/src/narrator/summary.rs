//! The `summary` style of the narrator: every event, described on one line by its fields, for
//! `keel runs events`' table. Unlike narration (a few events, in sentences), every event has a
//! summary, so this match is exhaustive: a new event does not compile until it is described.

use keel_types::{AdapterEvent, Event, EventPayload, NodeKey};

/// `[2]`, `#3` or `[2]#3`: a node's loop iteration (after the first) and map item.
fn node_key(key: &NodeKey) -> String {
    let mut text = String::new();
    if key.iteration > 1 {
        text.push_str(&format!("[{}]", key.iteration));
    }
    if let Some(item) = key.item {
        text.push_str(&format!("#{item}"));
    }
    text
}

/// The `summary` style: a one-line, field-by-field description of any event, at most 100
/// characters, control characters flattened (`keel runs events`).
pub(super) fn line(event: &Event) -> String {
    let text = match &event.payload {
        EventPayload::RequestStarted { input, .. } => format!("input={input:?}"),
        EventPayload::RequestCompleted {
            steps,
            usage,
            duration_ms,
            ..
        } => {
            format!(
                "steps={steps} tokens={} {duration_ms}ms",
                usage.total_tokens
            )
        }
        EventPayload::RequestFailed { error, .. } => error.message.clone(),
        EventPayload::RequestCancelled { reason, .. }
        | EventPayload::RequestInterrupted { reason, .. } => reason.clone(),
        EventPayload::RequestResumed {
            reissued_round,
            rerun_calls,
            abandoned_calls,
        } => format!(
            "reissued_round={reissued_round} rerun={} abandoned={}",
            rerun_calls.join(","),
            abandoned_calls.join(",")
        ),
        EventPayload::RequestForked {
            from_request_id,
            at_seq,
        } => format!("from={from_request_id} at={at_seq}"),
        EventPayload::ContractFailed { missing_tools, .. } => {
            format!("missing={}", missing_tools.join(","))
        }
        EventPayload::PromptAssembled { step, sections } => {
            let sections: Vec<String> = sections
                .iter()
                .map(|s| format!("{}={}B", s.name, s.bytes))
                .collect();
            format!("step={step} {}", sections.join(" "))
        }
        EventPayload::ModelStarted {
            step,
            attempt,
            model,
            ..
        } => {
            format!("step={step} attempt={attempt} model={model}")
        }
        EventPayload::ModelCompleted {
            step,
            stop_reason,
            tool_calls,
            usage,
            latency_ms,
            ..
        } => format!(
            "step={step} stop={stop_reason:?} tool_calls={} tokens={} {latency_ms}ms",
            tool_calls.len(),
            usage.total_tokens
        ),
        EventPayload::ModelRetry {
            attempt,
            error,
            delay_ms,
            ..
        } => {
            format!("attempt={attempt} delay={delay_ms}ms {}", error.message)
        }
        EventPayload::ModelQueued {
            step,
            model,
            wait_ms,
        } => format!("step={step} {model} waited {wait_ms}ms"),
        EventPayload::ContextCompacted {
            step,
            reason,
            tokens_before,
            tokens_after,
            elided,
            summarized,
            error,
            ..
        } => {
            let summarized = summarized.map_or(0, |[from, to]| to - from);
            let failed = error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            format!(
                "step={step} {reason}: {tokens_before} → {tokens_after} tokens, {} elided, {summarized} summarized{failed}",
                elided.len()
            )
        }
        EventPayload::ModelFallback {
            step,
            from,
            to,
            reason,
            note,
        } => match note {
            Some(note) => format!("step={step} {from} → {to}: {} ({note})", reason.message),
            None => format!("step={step} {from} → {to}: {}", reason.message),
        },
        EventPayload::ToolSandbox { tool, sandbox, .. } => format!(
            "{tool} sandbox filesystem={} network={} by {}{}",
            sandbox.filesystem,
            sandbox.network,
            sandbox.mechanisms.join(", "),
            match sandbox.missing.is_empty() {
                true => String::new(),
                false => format!(" (missing: {})", sandbox.missing.join("; ")),
            }
        ),
        EventPayload::ToolGuard {
            tool,
            decision,
            issues,
            ..
        } => {
            format!("{tool} {decision:?} issues={}", issues.len())
        }
        EventPayload::Adapter { event } => match event {
            AdapterEvent::OutputDelta { text, .. } => format!("agent.output.delta {text:?}"),
            AdapterEvent::ToolStart {
                tool, arguments, ..
            } => format!("agent.tool.start {tool} {arguments}"),
            AdapterEvent::ToolProgress {
                tool,
                progress,
                total,
                message,
                ..
            } => {
                let total = total.map(|t| format!("/{t}")).unwrap_or_default();
                let message = message.as_deref().unwrap_or_default();
                format!("agent.tool.progress {tool} {progress}{total} {message}")
            }
            AdapterEvent::ToolResult {
                tool,
                ok,
                duration_ms,
                ..
            } => {
                format!("agent.tool.result {tool} ok={ok} {duration_ms}ms")
            }
            AdapterEvent::Handoff {
                agent,
                child_request_id,
                ..
            } => format!("agent.handoff {agent} → {child_request_id}"),
            AdapterEvent::Progress { kind, data, .. } => format!("agent.progress {kind} {data}"),
            AdapterEvent::Log { stream, line, .. } => format!("agent.log {stream} {line}"),
        },
        EventPayload::OutputRejected {
            attempt,
            max_retries,
            issues,
        } => format!(
            "attempt={attempt}/{} {}",
            max_retries + 1,
            issues
                .iter()
                .map(|i| format!("{} {}", i.path, i.message))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        EventPayload::WorkflowStarted(started) => {
            format!("{} input={}", started.workflow, started.input)
        }
        EventPayload::WorkflowCompleted(done) => {
            format!("{} output={}", done.workflow, done.output)
        }
        EventPayload::WorkflowFailed(failed) => match &failed.node {
            Some(node) => format!("{} at {node}: {}", failed.workflow, failed.error),
            None => format!("{}: {}", failed.workflow, failed.error),
        },
        EventPayload::NodeStarted(started) => format!(
            "{}{} {} attempt={}{}",
            started.node,
            node_key(&started.key),
            started.kind,
            started.attempt,
            started
                .child_request_id
                .as_ref()
                .map(|id| format!(" run={id}"))
                .unwrap_or_default()
        ),
        EventPayload::NodeCompleted(done) => format!(
            "{}{} {}ms output={}",
            done.node,
            node_key(&done.key),
            done.duration_ms,
            done.output
        ),
        EventPayload::NodeFailed(failed) => format!(
            "{}{} attempt={} retry={}: {}",
            failed.node,
            node_key(&failed.key),
            failed.attempt,
            failed.will_retry,
            failed.error
        ),
        EventPayload::NodeSkipped(skipped) => format!(
            "{}{} {}",
            skipped.node,
            node_key(&skipped.key),
            skipped.reason
        ),
        EventPayload::PhaseStarted(phase)
        | EventPayload::PhaseBlocked(phase)
        | EventPayload::PhaseCompleted(phase)
        | EventPayload::PhaseVerified(phase) => match &phase.reason {
            Some(reason) => format!(
                "{} gate={}: {reason}",
                phase.phase,
                phase.gate.as_deref().unwrap_or("none")
            ),
            None => format!(
                "{} gate={}",
                phase.phase,
                phase.gate.as_deref().unwrap_or("none")
            ),
        },
        EventPayload::Narration { text, .. } => text.clone(),
        EventPayload::McpLifecycle {
            server,
            lifecycle,
            at,
            detail,
        } => match detail {
            Some(detail) => format!("{server} {lifecycle} at {at}: {detail}"),
            None => format!("{server} {lifecycle} at {at}"),
        },
        EventPayload::SkillOffered {
            offered, omitted, ..
        } => match omitted.is_empty() {
            true => format!("offered {}", offered.join(", ")),
            false => format!(
                "offered {}; left out (over budget) {}",
                offered.join(", "),
                omitted.join(", ")
            ),
        },
        EventPayload::SkillInjected {
            skill,
            reason,
            chars,
            truncated,
        } => format!(
            "{skill} ({}) {chars} chars{}",
            reason.as_str(),
            if *truncated { ", truncated" } else { "" }
        ),
        EventPayload::SkillCandidateCreated {
            candidate_id,
            skill,
            ..
        } => format!("{skill} proposed as {candidate_id}"),
        EventPayload::MemoryRecallCompleted {
            namespaces,
            record_ids,
            mode,
            omitted,
            chars,
            ..
        } => format!(
            "{} record(s) from {} ({mode}), {chars} chars{}",
            record_ids.len(),
            namespaces.join(", "),
            if *omitted > 0 {
                format!(", {omitted} over budget")
            } else {
                String::new()
            }
        ),
        EventPayload::MemoryCandidateSubmitted {
            namespace,
            text,
            decision,
            record_id,
            approval_id,
            ..
        } => format!(
            "{namespace} {}: {text}{}",
            decision.as_str(),
            record_id
                .as_ref()
                .or(approval_id.as_ref())
                .map(|id| format!(" ({id})"))
                .unwrap_or_default()
        ),
        EventPayload::MemoryApprovalRequested {
            approval_id,
            namespace,
            text,
            ..
        } => format!("{approval_id} {namespace}: {text}"),
        EventPayload::MemoryLifecycle {
            action,
            record_id,
            version,
            namespace,
            ..
        } => format!("{record_id} v{version} {} in {namespace}", action.as_str()),
        EventPayload::MemoryMaintenanceStarted { target, operations } => {
            format!("{} on {target}", operations.join(", "))
        }
        EventPayload::MemoryMaintenanceCompleted {
            target,
            merged,
            expired,
            ..
        } => format!("{target}: {merged} merged, {expired} expired"),
        EventPayload::MemoryMaintenanceFailed { target, error } => format!("{target}: {error}"),
        EventPayload::WorkspaceReloaded { digest, changes } => {
            format!("{digest}: {}", changes.join(", "))
        }
        EventPayload::ApprovalRequested { approval } => {
            format!(
                "{} {} {}",
                approval.approval_id, approval.tool, approval.arguments
            )
        }
        EventPayload::ApprovalResolved {
            approval_id,
            status,
            decided_by,
            ..
        } => format!(
            "{approval_id} {} by {}",
            status.as_str(),
            decided_by.as_deref().unwrap_or("-")
        ),
        EventPayload::PolicyDecided {
            tool,
            decision,
            source,
            ..
        } => format!("{decision} {tool} ({source})"),
        EventPayload::HookCompleted {
            hook,
            event,
            outcome,
            ..
        } => format!("{hook} {event} {outcome}"),
        EventPayload::HookFailed {
            hook, event, error, ..
        } => format!("{hook} {event} {error}"),
        EventPayload::DirectStarted {
            tool, arguments, ..
        } => format!("{tool} {arguments}"),
        EventPayload::DirectCompleted {
            tool,
            ok,
            duration_ms,
            ..
        } => format!("{tool} ok={ok} {duration_ms}ms"),
        EventPayload::ArtifactCreated { artifact, .. } => {
            format!(
                "{} {} bytes {}",
                artifact.uri, artifact.bytes, artifact.name
            )
        }
    };
    keel_types::one_line(&text, 100)
}
