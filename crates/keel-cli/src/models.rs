//! `keel models check`: one tiny request to each model of the workspace (reachability,
//! credentials, latency, streaming, tool calls); exits 1 when a model failed.

use std::path::Path;

use clap::Subcommand;
use serde_json::json;

use crate::error::CliError;
use crate::follow::OutputArgs;
use crate::{out, workspace};

#[derive(Debug, Subcommand)]
pub(crate) enum ModelsCommand {
    /// Send one tiny streamed request, with a tool to call, to each model.
    Check {
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn models(root: &Path, command: ModelsCommand) -> Result<(), CliError> {
    let ModelsCommand::Check { json } = command;
    let (runtime, _printer) = workspace::start(root, &OutputArgs::default()).await?;
    let checks = runtime.check_models().await;
    for check in &checks {
        if json {
            out::line(
                &json!({
                    "model": check.model,
                    "provider": check.provider,
                    "ok": check.ok,
                    "latencyMs": check.latency_ms,
                    "streamed": check.streamed,
                    "calledTool": check.called_tool,
                    "error": check.error,
                })
                .to_string(),
            );
            continue;
        }
        let yes_no = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        out::line(&match &check.error {
            None => format!(
                "{:<16} {:<10} ok      {:>6} ms  streamed {:<3}  called the tool {}",
                check.model,
                check.provider,
                check.latency_ms.unwrap_or_default(),
                yes_no(check.streamed),
                yes_no(check.called_tool),
            ),
            Some(error) => format!("{:<16} {:<10} FAILED  {error}", check.model, check.provider),
        });
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    match failed {
        0 => Ok(()),
        n => Err(CliError::failed(format!(
            "{n} of {} model(s) failed the check",
            checks.len()
        ))),
    }
}
