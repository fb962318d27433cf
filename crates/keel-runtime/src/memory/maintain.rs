//! Memory maintenance: expiry by TTL and compaction of duplicates.
//!
//! Compaction is deterministic. Two active records of one namespace and kind are duplicates
//! when their normalised texts (lowercase, words only) are equal, or when the full-text index
//! finds one for the other and their word sets overlap by at least `similarity` (Jaccard).
//! The older record is kept: it gets a new version holding the longer of the two texts and the
//! provenance of both, and the newer one is closed as merged into it.

use std::collections::{BTreeSet, HashSet};

use keel_types::{EventPayload, MemoryAction, MemoryFilter, MemoryMerge, MemoryRecord};

use super::MemoryService;
use crate::RuntimeError;

/// Candidates the full-text index proposes per record.
const NEIGHBOURS: usize = 10;

/// What maintenance should do.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceRequest {
    /// Compact only this namespace (expiry covers every namespace).
    pub namespace: Option<String>,
    pub expire: bool,
    pub compact: bool,
    /// The least word overlap (Jaccard, 0–1) of near duplicates; 1.0 merges only records
    /// whose normalised texts are equal.
    pub similarity: f64,
}

impl Default for MaintenanceRequest {
    fn default() -> Self {
        Self {
            namespace: None,
            expire: true,
            compact: true,
            similarity: 0.8,
        }
    }
}

/// What maintenance did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MaintenanceReport {
    pub expired: Vec<MemoryRecord>,
    /// The kept records' new versions, one per merge.
    pub merged: Vec<MemoryRecord>,
}

/// Lowercase words, joined by single spaces.
fn normalise(text: &str) -> String {
    words(text).collect::<Vec<_>>().join(" ")
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

fn jaccard(a: &str, b: &str) -> f64 {
    let a: BTreeSet<String> = words(a).collect();
    let b: BTreeSet<String> = words(b).collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

impl MemoryService {
    /// Runs maintenance, reporting each change through `emit` (`runtime.memory.lifecycle`).
    /// On an error, what was done stays done.
    pub async fn maintain(
        &self,
        request: &MaintenanceRequest,
        emit: &mut (dyn FnMut(EventPayload) + Send),
    ) -> Result<MaintenanceReport, RuntimeError> {
        if !(0.0..=1.0).contains(&request.similarity) {
            return Err(RuntimeError::Memory(format!(
                "similarity {} is not between 0 and 1",
                request.similarity
            )));
        }
        if let Some(namespace) = &request.namespace {
            self.memory_of(namespace)?;
        }
        let mut report = MaintenanceReport::default();
        if request.expire {
            report.expired = self.store.expire_memory(&keel_types::now_rfc3339()).await?;
            for record in &report.expired {
                emit(lifecycle(MemoryAction::Expired, record, None));
            }
        }
        if request.compact {
            self.compact(request, &mut report, emit).await?;
        }
        Ok(report)
    }

    async fn compact(
        &self,
        request: &MaintenanceRequest,
        report: &mut MaintenanceReport,
        emit: &mut (dyn FnMut(EventPayload) + Send),
    ) -> Result<(), RuntimeError> {
        let records = self
            .store
            .list_memory(&MemoryFilter {
                namespace: request.namespace.clone(),
                oldest_first: true,
                ..MemoryFilter::default()
            })
            .await?;
        let mut gone: HashSet<String> = HashSet::new();
        for record in records {
            if gone.contains(&record.id) {
                continue;
            }
            let mut kept = record;
            let neighbours = self
                .store
                .search_memory(
                    std::slice::from_ref(&kept.namespace),
                    &kept.text,
                    NEIGHBOURS,
                )
                .await?;
            for other in neighbours.into_iter().map(|h| h.record) {
                // The older record keeps; the newer merges into it (each pair once).
                if other.id == kept.id
                    || gone.contains(&other.id)
                    || other.kind != kept.kind
                    || (other.valid_from.as_str(), other.id.as_str())
                        < (kept.valid_from.as_str(), kept.id.as_str())
                {
                    continue;
                }
                let same = normalise(&other.text) == normalise(&kept.text);
                let similarity = jaccard(&other.text, &kept.text);
                // At 1.0 only equal normalised texts merge (not merely the same words).
                if !same && (request.similarity >= 1.0 || similarity < request.similarity) {
                    continue;
                }
                let reason = match same {
                    true => "the same text".to_owned(),
                    false => format!(
                        "near duplicate ({:.0}% of words shared)",
                        similarity * 100.0
                    ),
                };
                let text = match other.text.chars().count() > kept.text.chars().count() {
                    true => other.text.clone(),
                    false => kept.text.clone(),
                };
                let merged = self
                    .store
                    .merge_memory(
                        &MemoryMerge {
                            kept: kept.id.clone(),
                            dropped: other.id.clone(),
                            text,
                            reason: reason.clone(),
                        },
                        "maintenance",
                    )
                    .await?;
                emit(lifecycle(
                    MemoryAction::Merged,
                    &merged,
                    Some(format!("{} merged into it: {reason}", other.id)),
                ));
                gone.insert(other.id);
                report.merged.push(merged.clone());
                kept = merged;
            }
        }
        Ok(())
    }
}

fn lifecycle(action: MemoryAction, record: &MemoryRecord, detail: Option<String>) -> EventPayload {
    EventPayload::MemoryLifecycle {
        action,
        record_id: record.id.clone(),
        version: record.version,
        namespace: record.namespace.clone(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_compare_by_their_words() {
        assert_eq!(normalise("  Alice drinks TEA. "), "alice drinks tea");
        assert_eq!(jaccard("Alice drinks tea", "alice drinks tea!"), 1.0);
        assert!((jaccard("alice drinks green tea", "alice drinks tea") - 0.75).abs() < 1e-9);
        assert_eq!(jaccard("", ""), 0.0);
    }
}
