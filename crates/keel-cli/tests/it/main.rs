//! End-to-end tests of the `keel` binary: real processes, real files, a mock model on loopback.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod a2a_clients;
mod acp;
mod adapters;
mod agui_clients;
mod anthropic_clients;
mod approvals;
mod cancel;
mod cassettes;
mod claude_hooks;
mod client_params;
mod common;
mod compaction_crash;
mod console_browser;
mod crash;
mod db_restarts;
mod durability;
mod eval_cli;
mod governance;
mod key_budgets;
mod logging;
mod mcp_client;
mod mcp_memory;
mod mcp_names;
mod mcp_server;
mod memory_cli;
mod models_check;
mod openai_clients;
mod openapi_tester;
mod otel_resume;
mod policy;
mod quickstart;
mod redaction_cli;
mod reload;
mod replicas;
mod sandbox_doctor;
mod sandbox_escapes;
mod sessions;
mod skill_mentions;
mod skills_cli;
mod store_cli;
mod tools;
mod usage_cli;
mod workflows_cli;
mod workspace_errors;
