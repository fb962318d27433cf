//! One prompt's turn: the prompt becomes a run of the agent in the Keel session, its events
//! stream to the client as `session/update`s ([`super::updates`]), each approval the run asks
//! for becomes a `session/request_permission` whose answer decides it, and the turn answers
//! with how the run ended.
//!
//! Permission answers decide the approval as a person would with `keel approvals`: "allow"
//! approves this call ([`ApprovalScope::Once`]), "allow always" approves the tool for the rest
//! of the session ([`ApprovalScope::Session`], so its later calls are not asked), "deny" (or a
//! question the client cancelled or could not ask) denies it. When the approval is decided
//! elsewhere first (another shell, its timeout), the client's question is withdrawn with
//! `$/cancel_request`. `session/cancel` cancels the run: it ends `cancelled`, and so does the
//! turn.

use std::collections::HashMap;
use std::sync::Arc;

use keel::{
    ApprovalRecord, ApprovalScope, EventPayload, FinishReason, RequestOptions, RunResponse,
    RunStatus, Runtime, SessionId,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::children::ChildApprovals;
use super::fs::ClientFiles;
use super::rpc::{Peer, RpcError};
use super::updates::{Translator, send, tool_call_id, tool_kind, tool_title};
use super::wire::{
    ContentBlock, FsCapabilities, PERMISSION_OPTIONS, PermissionOutcome, PermissionResponse,
    ToolCallStatus, ToolCallUpdate,
};

/// A prompt's turn, as the connection started it.
pub(super) struct Turn {
    /// The session's id on the wire.
    pub acp_session: String,
    pub session: SessionId,
    pub input: String,
    /// Fires on `session/cancel`.
    pub cancel: CancellationToken,
    /// Who decides the turn's approvals, as recorded (`zed@acp`).
    pub decided_by: String,
    /// The client's file system, when it offers one: the run's file tools use it.
    pub fs: FsCapabilities,
}

/// The prompt's content as the run's input: text and links inline, in order; embedded
/// resources after it, each in a `<context>` block. Images and audio are refused (the agent
/// does not advertise them).
pub(super) fn input(blocks: &[ContentBlock]) -> Result<String, RpcError> {
    let mut text = String::new();
    let mut context = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text { text: part } => text.push_str(part),
            ContentBlock::ResourceLink { uri, name } => text.push_str(&format!("[{name}]({uri})")),
            ContentBlock::Resource { resource } => match &resource.text {
                Some(body) => context.push(format!(
                    "<context uri=\"{}\">\n{body}\n</context>",
                    resource.uri
                )),
                None => {
                    return Err(RpcError::invalid_params(format!(
                        "prompt[{index}]: resource `{}` has no text; Keel takes text resources only",
                        resource.uri
                    )));
                }
            },
            ContentBlock::Image {} | ContentBlock::Audio {} => {
                let kind = match block {
                    ContentBlock::Image {} => "image",
                    _ => "audio",
                };
                return Err(RpcError::invalid_params(format!(
                    "prompt[{index}]: {kind} content is not supported (promptCapabilities.{kind} is false)"
                )));
            }
        }
    }
    for block in context {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&block);
    }
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params("the prompt is empty"));
    }
    Ok(text)
}

/// Runs the turn — a run of `agent` — to its end; the prompt's answer.
pub(super) async fn run(
    runtime: &Runtime,
    agent: &str,
    peer: &Arc<Peer>,
    children: &Arc<ChildApprovals>,
    turn: Turn,
) -> Result<Value, RpcError> {
    let options = RequestOptions {
        input: turn.input.clone(),
        agent: Some(agent.to_owned()),
        session_id: Some(turn.session.clone()),
        files: ClientFiles::offered(peer, &turn.acp_session, turn.fs),
        ..Default::default()
    };
    let mut handle = runtime.request(options).await.map_err(start_error)?;
    handle.skip_narration();
    let mut child_approvals = children.watch(handle.request_id());
    let cancel_run = handle.cancel_token();
    let root = runtime.workspace().root.clone();
    let mut translator = Translator::new(&root);
    let mut asks = Asks {
        peer: peer.clone(),
        runtime: runtime.clone(),
        session: turn.acp_session.clone(),
        decided_by: turn.decided_by.clone(),
        open: HashMap::new(),
    };
    let mut cancelled = false;
    loop {
        let next = tokio::select! {
            event = handle.next_event() => event,
            Some(event) = child_approvals.events.recv() => {
                for update in translator.child(&event) {
                    send(peer, &turn.acp_session, &update);
                }
                asks.follow(&event);
                continue;
            }
            () = turn.cancel.cancelled(), if !cancelled => {
                cancelled = true;
                cancel_run.cancel();
                continue;
            }
        };
        let Some(event) = next else {
            break;
        };
        for update in translator.event(&event) {
            send(peer, &turn.acp_session, &update);
        }
        asks.follow(&event);
    }
    for update in translator.end() {
        send(peer, &turn.acp_session, &update);
    }
    asks.withdraw_all();
    let response = handle.wait().await.map_err(RpcError::internal)?;
    answer(&response)
}

/// Why a run could not start, as the prompt's error.
fn start_error(error: keel::Error) -> RpcError {
    match &error {
        keel::Error::Runtime(keel::RuntimeError::InvalidInput(_)) => {
            RpcError::invalid_params(error)
        }
        _ => RpcError::internal(error),
    }
}

/// The prompt's answer: how the run ended as a stop reason, the run's id in `_meta`; a run
/// that failed for another reason than a budget is an error naming why.
fn answer(response: &RunResponse) -> Result<Value, RpcError> {
    let meta = json!({ "keel": {
        "requestId": response.request_id,
        "status": response.status,
        "finishReason": response.finish_reason,
    }});
    let stop = match (response.status, response.finish_reason) {
        (RunStatus::Cancelled | RunStatus::Interrupted, _) => "cancelled",
        (_, FinishReason::MaxSteps) => "max_turn_requests",
        (_, FinishReason::Length | FinishReason::TokenBudget) => "max_tokens",
        (_, FinishReason::ContentFilter) => "refusal",
        (RunStatus::Failed, _) => {
            let why = response
                .error
                .as_ref()
                .map_or("no error recorded", |e| e.message.as_str());
            return Err(
                RpcError::internal(format!("run {} failed: {why}", response.request_id))
                    .with_data(meta),
            );
        }
        _ => "end_turn",
    };
    Ok(json!({ "stopReason": stop, "_meta": meta }))
}

/// The permission questions of one turn that the client has not answered yet.
struct Asks {
    peer: Arc<Peer>,
    runtime: Runtime,
    session: String,
    decided_by: String,
    /// Approval id → the id of the question asking it.
    open: HashMap<String, u64>,
}

impl Asks {
    /// Asks about an approval the run requested; withdraws the question of one settled.
    fn follow(&mut self, event: &keel::Event) {
        match &event.payload {
            EventPayload::ApprovalRequested { approval } => self.ask(approval),
            EventPayload::ApprovalResolved { approval_id, .. } => self.settled(approval_id),
            _ => {}
        }
    }

    /// Asks the client about `approval`; its answer decides it.
    fn ask(&mut self, approval: &ApprovalRecord) {
        let call = approval.call_id.as_deref().unwrap_or(&approval.approval_id);
        let mut title = tool_title(&approval.tool, &approval.arguments);
        if let Some(reason) = &approval.ask_reason {
            title = format!("{title} ({reason})");
        }
        let tool_call = ToolCallUpdate {
            tool_call_id: tool_call_id(&approval.request_id, call),
            title: Some(title),
            kind: Some(tool_kind(&approval.tool)),
            status: Some(ToolCallStatus::Pending),
            raw_input: Some(approval.arguments.clone()),
            ..Default::default()
        };
        let params = json!({
            "sessionId": self.session,
            "toolCall": tool_call,
            "options": PERMISSION_OPTIONS,
        });
        let (id, answer) = self.peer.request("session/request_permission", params);
        self.open.insert(approval.approval_id.clone(), id);
        let runtime = self.runtime.clone();
        let approval_id = approval.approval_id.clone();
        let decided_by = self.decided_by.clone();
        tokio::spawn(async move {
            // Withdrawn: decided elsewhere, or the turn is over.
            let Ok(answer) = answer.await else {
                return;
            };
            let (approve, scope, reason) = decision(answer);
            if let Err(error) = runtime
                .approvals()
                .decide(&approval_id, approve, scope, &decided_by, reason.as_deref())
                .await
            {
                tracing::info!(%approval_id, %error, "The editor's answer came after the approval was settled.");
            }
        });
    }

    /// `approval` was decided (here or elsewhere) or expired: its question, if still open,
    /// is withdrawn.
    fn settled(&mut self, approval: &str) {
        if let Some(id) = self.open.remove(approval) {
            self.peer.withdraw(id);
        }
    }

    fn withdraw_all(&mut self) {
        for (_, id) in self.open.drain() {
            self.peer.withdraw(id);
        }
    }
}

/// What the client's answer decides: approve or not, how far, and why when denied.
fn decision(answer: Result<Value, RpcError>) -> (bool, ApprovalScope, Option<String>) {
    let deny = |why: String| (false, ApprovalScope::Once, Some(why));
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return deny(format!("the editor could not ask: {error}")),
    };
    match serde_json::from_value::<PermissionResponse>(answer) {
        Ok(PermissionResponse {
            outcome: PermissionOutcome::Selected { option_id },
        }) => match option_id.as_str() {
            "allow_once" => (true, ApprovalScope::Once, None),
            "allow_always" => (true, ApprovalScope::Session, None),
            "reject_once" | "reject_always" => (false, ApprovalScope::Once, None),
            other => deny(format!(
                "the editor chose an option Keel did not offer: `{other}`"
            )),
        },
        Ok(PermissionResponse {
            outcome: PermissionOutcome::Cancelled,
        }) => deny("the editor cancelled the question".to_owned()),
        Err(error) => deny(format!("the editor's answer was not understood: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(json: Value) -> Vec<ContentBlock> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_prompts_blocks_become_one_input() {
        let prompt = blocks(json!([
            {"type": "text", "text": "Explain "},
            {"type": "resource_link", "uri": "file:///ws/a.rs", "name": "a.rs"},
            {"type": "text", "text": " please."},
            {"type": "resource", "resource": {"uri": "file:///ws/b.rs", "text": "fn b() {}"}},
        ]));
        assert_eq!(
            input(&prompt).unwrap(),
            "Explain [a.rs](file:///ws/a.rs) please.\n\n<context uri=\"file:///ws/b.rs\">\nfn b() {}\n</context>"
        );
    }

    #[test]
    fn images_blobs_and_empty_prompts_are_refused_naming_why() {
        let image = blocks(json!([{"type": "image", "data": "AAAA", "mimeType": "image/png"}]));
        assert!(
            input(&image)
                .unwrap_err()
                .message
                .contains("prompt[0]: image")
        );
        let blob = blocks(json!([{"type": "resource", "resource": {"uri": "x", "blob": "AA"}}]));
        assert!(input(&blob).unwrap_err().message.contains("has no text"));
        assert!(input(&[]).unwrap_err().message.contains("empty"));
    }

    #[test]
    fn permission_answers_map_to_decisions() {
        let selected = |id: &str| Ok(json!({"outcome": {"outcome": "selected", "optionId": id}}));
        assert_eq!(
            decision(selected("allow_once")),
            (true, ApprovalScope::Once, None)
        );
        assert_eq!(
            decision(selected("allow_always")),
            (true, ApprovalScope::Session, None)
        );
        assert_eq!(
            decision(selected("reject_once")),
            (false, ApprovalScope::Once, None)
        );
        assert!(!decision(selected("maybe")).0);
        assert!(!decision(Ok(json!({"outcome": {"outcome": "cancelled"}}))).0);
        assert!(!decision(Ok(json!({"nonsense": true}))).0);
    }
}
