//! What runs used and cost, summed by agent, session, API key or day: `keel usage`,
//! [`crate::kernel::Runs::usage`]. Each tree of runs counts once, from its root's stored
//! record: a subagent's or a workflow node's usage is already in the run that started it
//! (and in that run's budget); its cost is in the currency of its first priced round.

use std::collections::BTreeMap;

use keel_types::{
    RequestId, RunCursor, RunFilter, RunRecord, RunStore, SessionId, StoreError, Usage,
};
use serde::Serialize;

/// How usage is grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageBy {
    Agent,
    Session,
    /// The API key (its name) that started the run; runs started without one are `(none)`.
    Key,
    /// The UTC day the run started.
    Day,
}

impl std::str::FromStr for UsageBy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "agent" => Ok(Self::Agent),
            "session" => Ok(Self::Session),
            "key" => Ok(Self::Key),
            "day" => Ok(Self::Day),
            other => Err(format!(
                "cannot group usage by `{other}`: agent, session, key or day"
            )),
        }
    }
}

impl UsageBy {
    /// One grouping or several separated by commas (`day,agent`), in order.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, String> {
        text.split(',').map(|by| by.trim().parse()).collect()
    }
}

/// One group's sum: `runs` counts the top-level runs (each with what its children used).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// The agent, session id, key name or day (`(none)` when a run has no session or key);
    /// grouped by several, their values joined with ` / `.
    pub group: String,
    /// Grouped by several: each one's value, in the order asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    pub runs: u64,
    pub usage: Usage,
}

/// How many records a page reads.
const PAGE: usize = 1_000;

fn group_of(run: &RunRecord, by: UsageBy) -> String {
    let none = || "(none)".to_owned();
    match by {
        UsageBy::Agent => run.agent.clone(),
        UsageBy::Session => run
            .session_id
            .as_ref()
            .map_or_else(none, ToString::to_string),
        UsageBy::Key => run.owner.clone().unwrap_or_else(none),
        UsageBy::Day => run.started_at.get(..10).map_or_else(none, str::to_owned),
    }
}

/// The usage of the runs `filter` selects (its `before` and `limit` are the pages'), summed
/// by `by`, in group order.
pub async fn usage_by(
    store: &dyn RunStore,
    by: UsageBy,
    filter: &RunFilter,
) -> Result<Vec<UsageRow>, StoreError> {
    usage_grouped(store, &[by], filter).await
}

/// [`usage_by`] with several groupings at once (`day` then `agent`: each agent's usage per
/// day), in the order of their values.
pub async fn usage_grouped(
    store: &dyn RunStore,
    by: &[UsageBy],
    filter: &RunFilter,
) -> Result<Vec<UsageRow>, StoreError> {
    let mut groups: BTreeMap<Vec<String>, (u64, Usage)> = BTreeMap::new();
    let mut page = RunFilter {
        before: None,
        limit: Some(PAGE),
        ..filter.clone()
    };
    loop {
        let runs = store.list_runs(&page).await?;
        for run in runs.iter().filter(|r| r.links.parent_id.is_none()) {
            let key = by.iter().map(|by| group_of(run, *by)).collect();
            let (count, usage) = groups.entry(key).or_default();
            *count += 1;
            usage.add(&run.usage);
        }
        match runs.last() {
            Some(last) if runs.len() == PAGE => page.before = Some(RunCursor::of(last)),
            _ => break,
        }
    }
    Ok(groups
        .into_iter()
        .map(|(key, (runs, usage))| UsageRow {
            group: key.join(" / "),
            groups: if key.len() > 1 { key } else { Vec::new() },
            runs,
            usage,
        })
        .collect())
}

/// What the other top-level runs of `session` used (a session's budget counts them).
pub(crate) async fn used_in_session(
    store: &dyn RunStore,
    session: &SessionId,
    except: &RequestId,
) -> Result<Usage, StoreError> {
    let mut used = Usage::default();
    let mut page = RunFilter {
        session: Some(session.clone()),
        limit: Some(PAGE),
        ..RunFilter::default()
    };
    loop {
        let runs = store.list_runs(&page).await?;
        for run in runs
            .iter()
            .filter(|r| r.links.parent_id.is_none() && r.request_id != *except)
        {
            used.add(&run.usage);
        }
        match runs.last() {
            Some(last) if runs.len() == PAGE => page.before = Some(RunCursor::of(last)),
            _ => return Ok(used),
        }
    }
}
