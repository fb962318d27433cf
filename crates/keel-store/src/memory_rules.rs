//! What both stores' memory does the same way, whatever the database: the versions a change
//! makes (a first version, an update, a merge), the words a recall searches for, and cosine
//! similarity. The stores only decide how the rows are written and found.

use keel_types::{
    MemoryCandidate, MemoryMerge, MemoryRecord, MemorySource, MemoryStatus, MemoryUpdate,
    Provenance, StoreError,
};

/// Words that say nothing about a record; left out of a recall query unless it has no other
/// word (they match nearly every record and only cost time).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not",
    "of", "on", "or", "our", "please", "she", "should", "so", "some", "tell", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "to", "up", "us", "was",
    "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you",
    "your",
];

/// The words a recall looks for in free text: lower-cased runs of letters and digits (so no
/// word can be read as query syntax), stop words left out when other words remain, sorted and
/// without repeats. Empty when the text has no word.
pub(crate) fn query_words(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept: Vec<String> = words
        .iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .cloned()
        .collect();
    if kept.is_empty() {
        kept = words;
    }
    kept.sort();
    kept.dedup();
    kept
}

/// Cosine similarity; 0 when either vector is zero or their lengths differ.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// A candidate's first version, approved by `approved_by` at `now`.
pub(crate) fn first_version(
    candidate: &MemoryCandidate,
    approved_by: &str,
    now: &str,
) -> MemoryRecord {
    MemoryRecord {
        id: keel_types::new_id("mem"),
        version: 1,
        namespace: candidate.namespace.clone(),
        memory: candidate.memory.clone(),
        kind: candidate.kind,
        text: candidate.text.clone(),
        tags: candidate.tags.clone(),
        status: MemoryStatus::Active,
        provenance: vec![Provenance {
            approved_by: Some(approved_by.to_owned()),
            ..candidate.provenance.clone()
        }],
        merged_from: Vec::new(),
        valid_from: now.to_owned(),
        valid_to: None,
        expires_at: candidate.expires_at.clone(),
        closed_by: None,
        close_reason: None,
    }
}

/// `record` closed as `status` by `by` at `now`.
pub(crate) fn closed(
    mut record: MemoryRecord,
    status: MemoryStatus,
    by: &str,
    reason: Option<&str>,
    now: &str,
) -> MemoryRecord {
    record.status = status;
    record.valid_to = Some(now.to_owned());
    record.closed_by = Some(by.to_owned());
    record.close_reason = reason.map(str::to_owned);
    record
}

/// The version after `current` with `change` applied by an operator.
pub(crate) fn updated(
    current: &MemoryRecord,
    change: &MemoryUpdate,
    by: &str,
    now: &str,
) -> MemoryRecord {
    let mut next = current.clone();
    if let Some(text) = &change.text {
        next.text.clone_from(text);
    }
    if let Some(kind) = change.kind {
        next.kind = kind;
    }
    if let Some(tags) = &change.tags {
        next.tags.clone_from(tags);
    }
    next.version += 1;
    next.valid_from = now.to_owned();
    next.provenance.push(Provenance {
        source: MemorySource::Operator,
        request_id: None,
        agent: None,
        seq: None,
        call_id: None,
        at: now.to_owned(),
        approved_by: Some(by.to_owned()),
    });
    next
}

/// Whether `kept` and `dropped` (their current, active versions) may be merged.
pub(crate) fn check_merge(
    merge: &MemoryMerge,
    kept: &MemoryRecord,
    dropped: &MemoryRecord,
) -> Result<(), StoreError> {
    if kept.namespace != dropped.namespace {
        return Err(StoreError::Invalid(format!(
            "memory records `{}` ({}) and `{}` ({}) are in different namespaces",
            merge.kept, kept.namespace, merge.dropped, dropped.namespace
        )));
    }
    Ok(())
}

/// Refuses merging a record into itself.
pub(crate) fn check_not_self(merge: &MemoryMerge) -> Result<(), StoreError> {
    match merge.kept == merge.dropped {
        true => Err(StoreError::Invalid(format!(
            "cannot merge memory record `{}` into itself",
            merge.kept
        ))),
        false => Ok(()),
    }
}

/// The reason recorded on the dropped record of a merge.
pub(crate) fn dropped_reason(merge: &MemoryMerge) -> String {
    format!("merged into {}: {}", merge.kept, merge.reason)
}

/// The kept record's next version: the merged text, both provenances, both tag sets, and
/// the longer of the two lifetimes.
pub(crate) fn merged(
    kept: &MemoryRecord,
    dropped: MemoryRecord,
    merge: &MemoryMerge,
    now: &str,
) -> MemoryRecord {
    let mut next = kept.clone();
    next.version += 1;
    next.valid_from = now.to_owned();
    next.text.clone_from(&merge.text);
    next.provenance.extend(dropped.provenance);
    next.merged_from.push(dropped.id);
    next.merged_from.extend(dropped.merged_from);
    for tag in dropped.tags {
        if !next.tags.contains(&tag) {
            next.tags.push(tag);
        }
    }
    next.expires_at = match (next.expires_at.take(), dropped.expires_at) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    next
}

/// The error for a change to a record whose latest version is not active.
pub(crate) fn not_active(id: &str, latest: Option<&MemoryRecord>) -> StoreError {
    StoreError::Invalid(match latest {
        Some(record) => format!(
            "memory record `{id}` is {} (since {})",
            record.status.as_str(),
            record.valid_to.as_deref().unwrap_or("an earlier time"),
        ),
        None => format!("no memory record `{id}`"),
    })
}

/// The error for importing over an existing record.
pub(crate) fn exists_already(id: &str) -> StoreError {
    StoreError::Invalid(format!(
        "memory record `{id}` already exists; nothing was imported"
    ))
}

/// An import's failure on one version, naming it.
pub(crate) fn import_error(record: &MemoryRecord, error: StoreError) -> StoreError {
    match error {
        StoreError::Invalid(message) | StoreError::Corrupt { message, .. } => {
            StoreError::Invalid(format!(
                "memory record `{}` version {}: {message}; nothing was imported",
                record.id, record.version
            ))
        }
        other => other,
    }
}
