//! Sessions belong to the principal that created them: the API key (`RequestOptions::owner`,
//! none for the local CLI, the SDK or a server without keys) and the request's
//! `metadata.user` (NFKC-normalised, so `ａｌｉｃｅ` is `alice`). A session is created with its
//! first request's principal; a later request that continues it must come from the same
//! principal, or it is refused with [`RuntimeError::SessionForbidden`] before anything of
//! the session (its transcript, memory recalled for it) reaches a prompt. This is the one
//! place the rule is kept, for every surface (SDK, CLI, `/v1`, `/api/requests`, the queue).
//!
//! An operator may continue another principal's session with
//! `RequestOptions::override_session_owner`; the owner overridden is recorded in the run's
//! `runtime.request.started`. Sessions from before owners were recorded have none and stay
//! open to anyone.

use keel_tools::hooks::HookInput;
use keel_types::{
    HookEvent, Message, RequestId, SessionId, SessionMessage, SessionOwner, SessionRecord,
    SessionSummary,
};

use super::{Kernel, RequestOptions};
use crate::RuntimeError;
use crate::governance::HookResult;

/// Sessions: a conversation's runs and transcript (`Runtime::sessions()` in the SDK). Cheap to
/// clone.
#[derive(Clone)]
pub struct Sessions {
    kernel: Kernel,
}

impl Kernel {
    /// The sessions of this runtime.
    pub fn sessions(&self) -> Sessions {
        Sessions {
            kernel: self.clone(),
        }
    }
}

impl Sessions {
    /// Sessions, most recently updated first.
    pub async fn list(&self, limit: Option<usize>) -> Result<Vec<SessionRecord>, RuntimeError> {
        Ok(self.kernel.store().list_sessions(limit).await?)
    }

    /// One session.
    pub async fn get(&self, id: &SessionId) -> Result<Option<SessionRecord>, RuntimeError> {
        Ok(self.kernel.store().get_session(id).await?)
    }

    /// A session's persisted transcript.
    pub async fn transcript(&self, id: &SessionId) -> Result<Vec<SessionMessage>, RuntimeError> {
        Ok(self.kernel.store().session_messages(id).await?)
    }

    /// Compacts a session's history: its turns before the last `keep` are summarized, with
    /// the summary it had, by the summarizer — the runtime's `context.summarizer`, else the
    /// model of the session's agent — and the summary stored. The session's runs send it in
    /// place of those turns from then on; the transcript keeps every turn. `None` when there
    /// is nothing to compact (no more than `keep` turns after the last summary).
    pub async fn compact(
        &self,
        id: &SessionId,
        keep: usize,
    ) -> Result<Option<SessionSummary>, RuntimeError> {
        let session = self
            .get(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no session `{id}`")))?;
        let through_before = session.summary.as_ref().map_or(0, |s| s.through_seq);
        let transcript: Vec<SessionMessage> = self
            .transcript(id)
            .await?
            .into_iter()
            .filter(|m| m.seq > through_before)
            .collect();
        // The turns in order, by request.
        let mut turns: Vec<(&RequestId, u64)> = Vec::new();
        for message in &transcript {
            match turns.last_mut() {
                Some((request, last)) if *request == &message.request_id => *last = message.seq,
                _ => turns.push((&message.request_id, message.seq)),
            }
        }
        let Some(cut) = turns.len().checked_sub(keep).filter(|cut| *cut > 0) else {
            return Ok(None);
        };
        let through = turns[cut - 1].1;
        let mut messages: Vec<Message> = session
            .summary
            .iter()
            .map(|s| {
                Message::user(format!(
                    "{}\n{}",
                    crate::history::SESSION_SUMMARY_HEADING,
                    s.text
                ))
            })
            .collect();
        messages.extend(
            transcript
                .iter()
                .filter(|m| m.seq <= through)
                .map(|m| m.message.clone()),
        );
        let agent = self.kernel.agent(&session.agent)?;
        let summarizer = self.kernel.workspace().runtime.context.summarizer.clone();
        let (model, provider) = match &summarizer {
            Some(name) => (
                name.clone(),
                self.kernel
                    .current()
                    .models
                    .get(name)
                    .and_then(|built| built.as_ref().ok().cloned()),
            ),
            None => (
                agent.model.clone(),
                self.kernel.provider(&session.agent, &agent).ok(),
            ),
        };
        let unavailable = |message: String| RuntimeError::ModelUnavailable {
            agent: session.agent.clone(),
            model: model.clone(),
            message,
        };
        let provider =
            provider.ok_or_else(|| unavailable("the summarizer cannot be used".into()))?;
        let (text, _) = crate::context::summarize(provider.as_ref(), &messages)
            .await
            .map_err(unavailable)?;
        let summary = SessionSummary {
            text,
            through_seq: through,
            at: keel_types::now_rfc3339(),
        };
        self.kernel
            .store()
            .set_session_summary(id, &summary)
            .await?;
        Ok(Some(summary))
    }

    /// Deletes a session and its transcript; its runs stay. Returns whether it existed. The
    /// `SessionEnd` hooks of an existing session run first (reason `deleted`).
    pub async fn delete(&self, id: &SessionId) -> Result<bool, RuntimeError> {
        if self.get(id).await?.is_some() {
            self.end(id, "deleted").await;
        }
        Ok(self.kernel.store().delete_session(id).await?)
    }

    /// Runs the `SessionEnd` hooks of a session that is closed (`keel chat` exits) or deleted,
    /// with `reason` in their input (`prompt_input_exit`, `deleted`, `other`). They are
    /// non-blocking and no run's log holds them: each call is traced, and a failure is only
    /// logged, whatever its `onError`.
    pub async fn end(&self, session: &SessionId, reason: &str) {
        let services = self.kernel.services();
        let governance = &services.governance;
        if !governance.wants(HookEvent::SessionEnd, None) {
            return;
        }
        let workspace = &services.workspace;
        let agent = match self.kernel.store().get_session(session).await {
            Ok(Some(record)) => Some(record.agent),
            _ => workspace.default_agent().map(str::to_owned),
        };
        let mut input = HookInput::new(HookEvent::SessionEnd, &workspace.root);
        input.session_id = Some(session.to_string());
        input.permission_mode = agent
            .as_deref()
            .map(|agent| governance.policy().mode(agent, None).as_str().to_owned());
        input.reason = Some(reason.to_owned());
        input.agent = agent;
        let (_, calls) = governance
            .hook_round(
                HookEvent::SessionEnd,
                None,
                &input,
                &workspace.root,
                &Default::default(),
            )
            .await;
        for call in calls {
            match call.result {
                HookResult::Answered(outcome) => tracing::info!(
                    %session, hook = %call.hook, outcome = %HookResult::describe(&outcome),
                    duration_ms = call.duration_ms, "SessionEnd hook answered."
                ),
                HookResult::Failed { error, on_error } => tracing::warn!(
                    %session, hook = %call.hook, %error, on_error = on_error.as_str(),
                    duration_ms = call.duration_ms, "SessionEnd hook failed."
                ),
            }
        }
    }
}

/// The principal a request comes from.
pub(super) fn principal(options: &RequestOptions) -> Result<SessionOwner, RuntimeError> {
    let user = options
        .metadata
        .get("user")
        .map(|user| keel_workspace::identity::normalise("metadata.user", user))
        .transpose()
        .map_err(RuntimeError::InvalidInput)?;
    Ok(SessionOwner {
        key: options.owner.clone(),
        user,
    })
}

/// What entering a session gave a run: its trimmed history, and the owner an operator
/// overrode to continue it.
#[derive(Default)]
pub(super) struct Entered {
    pub history: Vec<Message>,
    pub overridden: Option<SessionOwner>,
}

impl Kernel {
    /// Creates the request's session for its principal, or checks that the principal owns
    /// it. Returns the owner an operator overrode (`override_session_owner`), if any.
    pub(super) async fn claim_session(
        &self,
        session: &SessionId,
        agent: &str,
        options: &RequestOptions,
    ) -> Result<Option<SessionOwner>, RuntimeError> {
        let principal = principal(options)?;
        let record = self
            .inner
            .store
            .ensure_session(session, agent, &principal)
            .await?;
        match record.owner {
            // Created before owners were recorded: open to anyone.
            None => Ok(None),
            Some(owner) if owner == principal => Ok(None),
            Some(owner) if options.override_session_owner => {
                tracing::info!(%session, "Session continued by another principal (override).");
                Ok(Some(owner))
            }
            Some(_) => Err(RuntimeError::SessionForbidden(session.to_string())),
        }
    }

    /// The history a run of `session` is given: its summary, then the turns after it
    /// (without `skip`'s turn), trimmed to `budget_tokens`.
    pub(super) async fn session_history(
        &self,
        session: &keel_types::SessionId,
        skip: Option<&RequestId>,
        budget_tokens: u64,
    ) -> Result<Vec<keel_types::Message>, RuntimeError> {
        let transcript = self.inner.store.session_messages(session).await?;
        let summary = self
            .inner
            .store
            .get_session(session)
            .await?
            .and_then(|s| s.summary);
        Ok(crate::history::session_history(
            transcript,
            summary.as_ref(),
            skip,
            budget_tokens,
        ))
    }

    /// Enters the request's session, if it names one: [`Self::claim_session`], then the
    /// session's transcript (without `skip_turn_of`'s turn) trimmed to the history budget.
    pub(super) async fn enter_session(
        &self,
        agent: &str,
        options: &RequestOptions,
        skip_turn_of: Option<&RequestId>,
        history_tokens: u64,
    ) -> Result<Entered, RuntimeError> {
        let Some(session) = &options.session_id else {
            return Ok(Entered::default());
        };
        let overridden = self.claim_session(session, agent, options).await?;
        let history = self
            .session_history(session, skip_turn_of, history_tokens)
            .await?;
        Ok(Entered {
            history,
            overridden,
        })
    }
}
