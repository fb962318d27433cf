//! Recall: ranking one namespace's records for a query (full-text bm25; with embeddings,
//! fused with cosine similarity by reciprocal rank), and the memory part of a run's prompt
//! (`read-before-plan`).

use std::collections::{BTreeMap, HashMap};

use keel_types::{EventPayload, MemoryHit, Message, SessionId};

use super::{Access, MemoryPrompt, MemoryService};
use crate::RuntimeError;

/// The `k` of reciprocal-rank fusion: each list adds `1 / (K + rank)`.
const RRF_K: f64 = 60.0;
/// Records without an embedding embedded per recall (the rest wait for the next one).
const EMBED_BATCH: usize = 64;

/// The heading of the memory part of a prompt.
const HEADING: &str = "Memory: records recalled for this request from long-term memory. Use \
                       them when they help, and name a record's id (e.g. [mem_…]) when you rely \
                       on it.";

impl MemoryService {
    /// The best records of one namespace for `query`, at most `limit`.
    pub(super) async fn rank(
        &self,
        access: &Access,
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, RuntimeError> {
        let spec = self.spec(&access.memory)?;
        let namespaces = std::slice::from_ref(&access.namespace);
        let wide = limit.saturating_mul(4).max(limit);
        let mut text_hits = self.store.search_memory(namespaces, query, wide).await?;
        text_hits.retain(|h| h.text_score.unwrap_or(0.0) >= spec.recall.min_score);
        let Some(embeddings) = &spec.embeddings else {
            text_hits.truncate(limit);
            return Ok(text_hits);
        };
        let Some(embedder) = self.embedders.get(&embeddings.model) else {
            return Err(RuntimeError::Memory(format!(
                "Memory `{}` ranks by embeddings of model `{}`, which is unavailable",
                access.memory, embeddings.model
            )));
        };
        // Records stored elsewhere (an approval decided in another process, an import) get
        // their embeddings here. An embeddings model that fails leaves recall to full text:
        // a run does not fail because its memory ranks less well.
        let query_vector = match self.embed_query(embedder.as_ref(), namespaces, query).await {
            Ok(vector) => vector,
            Err(error) => {
                tracing::warn!(memory = %access.memory, model = %embeddings.model, %error, "Embeddings failed; recalling by full text only.");
                text_hits.truncate(limit);
                return Ok(text_hits);
            }
        };
        let mut vector_hits = self
            .store
            .nearest_memory(namespaces, &query_vector, wide)
            .await?;
        vector_hits.retain(|h| h.similarity.unwrap_or(0.0) >= embeddings.min_similarity);
        Ok(fuse(text_hits, vector_hits, limit))
    }

    /// Embeds the namespace's records that lack an embedding (a batch), then the query.
    async fn embed_query(
        &self,
        embedder: &dyn keel_types::Embedder,
        namespaces: &[String],
        query: &str,
    ) -> Result<Vec<f32>, RuntimeError> {
        let failed = |e: keel_types::ModelError| RuntimeError::Memory(e.to_string());
        let missing = self
            .store
            .memory_without_embedding(namespaces, EMBED_BATCH)
            .await?;
        if !missing.is_empty() {
            let texts: Vec<String> = missing.iter().map(|(_, _, t)| t.clone()).collect();
            let vectors = embedder.embed(&texts).await.map_err(failed)?;
            for ((id, version, _), vector) in missing.iter().zip(vectors) {
                self.store
                    .set_memory_embedding(id, *version, &vector)
                    .await?;
            }
        }
        Ok(embedder
            .embed(&[query.to_owned()])
            .await
            .map_err(failed)?
            .pop()
            .unwrap_or_default())
    }

    /// The memory part of a run's prompt: the best records of each namespace the agent reads,
    /// within each memory's `recall.maxChars`, and the event that records them (with the text,
    /// so a resumed run sees the same). Nothing when the agent reads no memory.
    pub async fn recall(
        &self,
        agent: &str,
        session: Option<&SessionId>,
        metadata: &BTreeMap<String, String>,
        input: &str,
    ) -> Result<MemoryPrompt, RuntimeError> {
        let accesses = self.namespaces(agent, session, metadata, false)?;
        if accesses.is_empty() {
            return Ok(MemoryPrompt::default());
        }
        let mut lines: Vec<String> = Vec::new();
        let (mut ids, mut namespaces) = (Vec::new(), Vec::new());
        let (mut omitted, mut hybrid) = (0u64, false);
        for access in &accesses {
            let spec = self.spec(&access.memory)?;
            namespaces.push(access.namespace.clone());
            if !spec.recall.enabled {
                continue;
            }
            hybrid |= spec.embeddings.is_some();
            let hits = self.rank(access, input, spec.recall.top_k as usize).await?;
            let mut used = 0usize;
            for hit in hits {
                let record = hit.record;
                let line = format!(
                    "- [{}] ({}) {}",
                    record.id,
                    record.kind.as_str(),
                    record.text
                );
                let chars = line.chars().count();
                if used + chars > spec.recall.max_chars as usize {
                    omitted += 1;
                    continue;
                }
                used += chars;
                ids.push(record.id);
                lines.push(line);
            }
        }
        let context = match lines.is_empty() {
            true => String::new(),
            false => format!("{HEADING}\n{}", lines.join("\n")),
        };
        Ok(MemoryPrompt {
            messages: (!context.is_empty())
                .then(|| Message::system(context.clone()))
                .into_iter()
                .collect(),
            events: vec![EventPayload::MemoryRecallCompleted {
                namespaces,
                record_ids: ids,
                mode: if hybrid { "hybrid" } else { "fulltext" }.to_owned(),
                omitted,
                chars: context.chars().count() as u64,
                context,
            }],
        })
    }
}

/// Reciprocal-rank fusion of the full-text and the embedding rankings: each list a record is
/// in adds `1 / (60 + rank)`; ties keep full-text order.
fn fuse(text: Vec<MemoryHit>, vector: Vec<MemoryHit>, limit: usize) -> Vec<MemoryHit> {
    let mut fused: Vec<MemoryHit> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (list, is_text) in [(text, true), (vector, false)] {
        for (rank, hit) in list.into_iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f64 + 1.0);
            match index.get(&hit.record.id) {
                Some(&at) => {
                    let entry = &mut fused[at];
                    entry.score += add;
                    if is_text {
                        entry.text_score = hit.text_score;
                    } else {
                        entry.similarity = hit.similarity;
                    }
                }
                None => {
                    index.insert(hit.record.id.clone(), fused.len());
                    fused.push(MemoryHit { score: add, ..hit });
                }
            }
        }
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(limit);
    fused
}
