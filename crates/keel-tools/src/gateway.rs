//! The gateway.
