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

use keel_types::{Message, RequestId, SessionId, SessionOwner};

use super::{Kernel, RequestOptions};
use crate::RuntimeError;
use crate::history::trim_history;

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
        let transcript = self.inner.store.session_messages(session).await?;
        let history = trim_history(
            transcript
                .into_iter()
                .filter(|m| Some(&m.request_id) != skip_turn_of)
                .map(|m| m.message)
                .collect(),
            history_tokens,
        );
        Ok(Entered {
            history,
            overridden,
        })
    }
}
