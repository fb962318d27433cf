//! Integration tests of the SDK: whole runs through the real parts — workspace files, the
//! `openai` provider against a mock server speaking SSE over a socket, the gateway, built-in and
//! command tools, and the JSONL run log.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod adapters;
mod anthropic_runs;
mod architecture;
mod cancel;
mod common;
mod context;
mod direct_finish;
mod event_fields;
mod gateway;
mod gateway_eval;
mod in_process_hooks;
mod lifecycle;
mod loop_budgets;
mod mcp_faults;
mod mcp_lifecycle;
mod mcp_names;
mod memory;
mod openai_runs;
mod partial_store;
mod public_api;
mod rate_limits;
mod redaction;
mod reference_run;
mod reload;
mod remote_agents;
mod replay;
mod resume;
mod sdk;
mod sessions;
mod skills;
mod stop_hooks;
mod subagents;
mod task_guard;
mod tidy;
mod workflows;
