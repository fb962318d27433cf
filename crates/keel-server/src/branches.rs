//! Continuing and branching runs over HTTP (operator keys): `POST /api/requests/{id}/resume`
//! continues an interrupted run from its log, `POST /api/requests/{id}/fork` starts a new run
//! from a run's first `atSeq` events — what `keel runs resume|fork` do, for the console.

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::{Extension, body::Bytes};
use keel::RequestId;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ApiError;
use crate::body::parse_body;
use crate::error::runtime_error;
use crate::requests::{answer_started, visible_run};
use crate::state::{AppState, Principal};

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    /// Answer when the run has ended (200 and the `RunResponse`) instead of at once (202).
    #[serde(default)]
    wait: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// The last event copied from the original (its `seq`, before its end). Sequence numbers
    /// are stored as signed 64-bit integers, so at most 2^63 - 1.
    #[schemars(range(min = 1, max = 9_223_372_036_854_775_807_u64))]
    #[serde(deserialize_with = "whole_number")]
    at_seq: u64,
    #[serde(default)]
    wait: bool,
}

/// A JSON integer, also when written as a number with a zero fraction (`4.0`), as JSON Schema
/// counts it; anything else is an error naming what it is.
fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = match number.as_u64() {
        Some(n) => Some(n),
        None => number
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64),
    };
    match whole {
        Some(n) if i64::try_from(n).is_ok() => Ok(n),
        _ => Err(serde::de::Error::custom(format!(
            "`atSeq` must be a whole number from 1 to {}, not {number}",
            i64::MAX
        ))),
    }
}

/// `POST /api/requests/{id}/resume` (`{wait?}`): continues an `interrupted` run; 202
/// `{requestId}` or, waiting, the `RunResponse`. 400 when the run is not interrupted.
pub(crate) async fn resume_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let resume: ResumeBody = parse_body(body, true)?;
    let id = RequestId::from(id);
    visible_run(&state.runtime, &principal, &id).await?;
    let ticket = state.admission.admit()?;
    let handle = state.runtime.resume(&id).await.map_err(runtime_error)?;
    answer_started(handle, ticket, resume.wait).await
}

/// `POST /api/requests/{id}/fork` (`{atSeq, wait?}`): a new run copying the first `atSeq`
/// events of run `id` and continuing from there (`links.forkedFrom`); 202 `{requestId}` or,
/// waiting, the `RunResponse`. 400 when `atSeq` is not an event before the run's end.
pub(crate) async fn fork_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let fork: ForkBody = parse_body(body, false)?;
    let id = RequestId::from(id);
    visible_run(&state.runtime, &principal, &id).await?;
    let ticket = state.admission.admit()?;
    let handle = state
        .runtime
        .fork(&id, fork.at_seq)
        .await
        .map_err(runtime_error)?;
    answer_started(handle, ticket, fork.wait).await
}
