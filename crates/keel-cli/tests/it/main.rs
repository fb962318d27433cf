//! End-to-end tests of the `keel` binary: real processes, real files, a mock model on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod cancel;
mod common;
mod crash;
mod governance;
mod openai_clients;
mod policy;
mod quickstart;
mod sessions;
mod tools;
mod workspace_errors;
