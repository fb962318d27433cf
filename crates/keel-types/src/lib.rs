//! Keel's vocabulary: the wire types, events, typed errors and ports that every other crate
//! shares.
//!
//! This crate is deliberately logic-free and dependency-light (serde, ids and time; no tokio, no
//! HTTP, no database). Start with [`event`] for the public event contract, [`run`] for the run
//! record, and [`ports`] for the traits concrete providers, tools and stores implement.

pub mod event;
pub mod ids;
pub mod message;
pub mod ports;
pub mod run;

pub use event::{AdapterEvent, Event, EventPayload, GuardDecision, Issue};
pub use ids::{EventId, RequestId, SessionId, new_id};
pub use message::{
    Message, ModelEvent, ModelParams, ModelRequest, ModelStopReason, Role, ToolCall, ToolSpec,
    Usage,
};
pub use ports::{
    BoxStream, ModelError, ModelProvider, ModelStream, RunFilter, RunStore, StoreError, Tool,
    ToolContext, ToolError, ToolOutput,
};
pub use run::{ErrorCode, ErrorInfo, FinishReason, RunRecord, RunStatus};

/// The current time as an RFC 3339 string with millisecond precision, in UTC.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let ms = now.millisecond();
    let now = now
        .replace_nanosecond(u32::from(ms) * 1_000_000)
        .unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
