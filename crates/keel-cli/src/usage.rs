//! `keel usage`: what runs used and cost, summed by agent, session, API key or day, from the
//! store (each run once, from its record).

use std::path::Path;

use clap::Args;
use keel::{RunFilter, UsageBy};

use crate::error::CliError;
use crate::out;
use crate::workspace::open_store;

#[derive(Debug, Args)]
pub(crate) struct UsageArgs {
    /// Group by `agent` (default), `session`, `key` (the API key that started the run) or
    /// `day` (UTC), or by several separated by commas (`day,agent`: each agent's per day).
    #[arg(long, default_value = "agent")]
    by: String,
    /// Only runs started since then: a duration (`24h`, `7d`) or an RFC 3339 time.
    #[arg(long)]
    since: Option<String>,
    /// One JSON object per group on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn usage(root: &Path, args: UsageArgs) -> Result<(), CliError> {
    let by = UsageBy::parse_list(&args.by).map_err(CliError::usage)?;
    let filter = RunFilter {
        since: args
            .since
            .as_deref()
            .map(crate::runs::parse_since)
            .transpose()?,
        ..Default::default()
    };
    let stores = open_store(root).await?;
    let rows = keel::usage_grouped(stores.runs.as_ref(), &by, &filter).await?;
    if args.json {
        for row in &rows {
            out::line(&serde_json::to_string(row)?);
        }
        return Ok(());
    }
    if rows.is_empty() {
        out::line("no runs");
        return Ok(());
    }
    let lines = out::table(
        &["GROUP", "RUNS", "PROMPT", "COMPLETION", "CACHED", "COST"],
        &[1, 2, 3, 4],
        rows.iter().map(|row| {
            vec![
                row.group.clone(),
                row.runs.to_string(),
                row.usage.prompt_tokens.to_string(),
                row.usage.completion_tokens.to_string(),
                row.usage.cache_read_tokens.to_string(),
                row.usage
                    .cost
                    .map_or_else(|| "-".to_owned(), |cost| cost.to_string()),
            ]
        }),
    );
    for line in lines {
        out::line(&line);
    }
    Ok(())
}
