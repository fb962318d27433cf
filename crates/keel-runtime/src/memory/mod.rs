//! Long-term memory in runs and for operators (`docs/workspace.md#memory`).
//!
//! [`MemoryService`] is the one governed path to the memory store: it renders an agent's
//! namespaces from the request ([`NamespaceTemplate`]), recalls records into a prompt
//! (`recall.rs`: full-text, or hybrid with embeddings fused by reciprocal rank), decides
//! candidates by the `Memory` document's write policy (stored, queued as a durable approval,
//! or refused), checks and redacts every text before it is kept, and maintains the store
//! (`maintain.rs`: expiry and compaction). The agent tools `memory_search` and `remember` are
//! in `tools.rs`.

mod extract;
mod maintain;
mod recall;
mod tools;

use std::collections::BTreeMap;
use std::sync::Arc;

use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, Embedder, EventPayload, MemoryCandidate,
    MemoryFilter, MemoryHit, MemoryKind, MemoryRecord, MemoryStore, MemoryUpdate, Message,
    Provenance, RequestId, RunStore, SessionId, StoreError, WriteDecision,
};
use keel_workspace::memory::{NamespaceScope, NamespaceTemplate};
use keel_workspace::skills::glob_matches;
use keel_workspace::{MemorySpec, Workspace};

use crate::RuntimeError;
use crate::redact::Redactor;

pub(crate) use extract::{Finished, ask, instructions, parse};
pub use maintain::{MaintenanceReport, MaintenanceRequest};
pub use tools::{MemorySearchTool, RememberTool};

/// The agent name memory maintenance and extraction runs are recorded under.
pub const MAINTENANCE_AGENT: &str = "memory";

/// One namespace an agent may use in a run: the `Memory` document and the rendered name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub memory: String,
    pub namespace: String,
}

/// What memory adds to a run's prompt, and the event that says so.
#[derive(Debug, Default, Clone)]
pub struct MemoryPrompt {
    /// A system message with the recalled records, after the skills.
    pub messages: Vec<Message>,
    /// `runtime.memory.recall.completed`, when the agent reads any memory.
    pub events: Vec<EventPayload>,
}

impl MemoryPrompt {
    /// The prompt a run recorded (`runtime.memory.recall.completed`), for a resumed, forked or
    /// replayed run: the same context, whatever the store holds now.
    pub fn recorded(events: &[keel_types::Event]) -> Option<(u64, Self)> {
        events.iter().find_map(|event| match &event.payload {
            payload @ EventPayload::MemoryRecallCompleted { context, .. } => Some((
                event.seq,
                Self {
                    messages: (!context.is_empty())
                        .then(|| Message::system(context.clone()))
                        .into_iter()
                        .collect(),
                    events: vec![payload.clone()],
                },
            )),
            _ => None,
        })
    }
}

/// What a run submits to memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub kind: MemoryKind,
    pub text: String,
    pub tags: Vec<String>,
}

/// The run a candidate comes from.
#[derive(Debug, Clone)]
pub struct Origin {
    pub request_id: RequestId,
    pub session_id: Option<SessionId>,
    pub agent: String,
    pub call_id: Option<String>,
    /// The event of the run the candidate came from (the call's start).
    pub seq: Option<u64>,
}

/// What became of a submitted candidate.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub decision: WriteDecision,
    /// For the model: what happened, in a sentence.
    pub message: String,
    /// `runtime.memory.candidate.submitted` and what followed it.
    pub events: Vec<EventPayload>,
}

/// What a write policy's decision came to (one of them, by decision).
#[derive(Default)]
struct Decided {
    record_id: Option<String>,
    approval_id: Option<String>,
    reason: Option<String>,
}

/// The memory of a runtime: the workspace's `Memory` documents over a store.
pub struct MemoryService {
    workspace: Arc<Workspace>,
    store: Arc<dyn MemoryStore>,
    runs: Arc<dyn RunStore>,
    redactor: Redactor,
    /// Embedding models by `Model` document name.
    embedders: BTreeMap<String, Arc<dyn Embedder>>,
    templates: BTreeMap<String, NamespaceTemplate>,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService")
            .field("memories", &self.templates.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn invalid(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Memory(message.into())
}

fn store_error(error: StoreError) -> RuntimeError {
    match error {
        // The store says what is wrong with the request (an unknown or closed record).
        StoreError::Invalid(message) if message.starts_with("no memory record") => {
            RuntimeError::NotFound(message)
        }
        StoreError::Invalid(message) => RuntimeError::Memory(message),
        other => RuntimeError::Store(other),
    }
}

impl MemoryService {
    /// The memory of `workspace` on `store` (also the run store, for approvals).
    pub fn new(
        workspace: Arc<Workspace>,
        store: Arc<dyn MemoryStore>,
        runs: Arc<dyn RunStore>,
        embedders: BTreeMap<String, Arc<dyn Embedder>>,
    ) -> Self {
        let templates = workspace
            .memories
            .iter()
            .filter_map(|(name, spec)| {
                // Loading checked every template; one that does not parse is left out.
                NamespaceTemplate::parse(&spec.namespace)
                    .ok()
                    .map(|t| (name.clone(), t))
            })
            .collect();
        Self {
            redactor: Redactor::for_workspace(&workspace),
            workspace,
            store,
            runs,
            embedders,
            templates,
        }
    }

    /// The `Memory` documents.
    pub fn memories(&self) -> &BTreeMap<String, MemorySpec> {
        &self.workspace.memories
    }

    fn spec(&self, memory: &str) -> Result<&MemorySpec, RuntimeError> {
        self.workspace
            .memories
            .get(memory)
            .ok_or_else(|| invalid(format!("no Memory document `{memory}`")))
    }

    /// The namespaces `agent` reads (or, with `write`, writes) in a run with this session and
    /// metadata; a namespace that cannot be rendered (missing metadata) is an error.
    pub fn namespaces(
        &self,
        agent: &str,
        session: Option<&SessionId>,
        metadata: &BTreeMap<String, String>,
        write: bool,
    ) -> Result<Vec<Access>, RuntimeError> {
        let session = session.map(ToString::to_string);
        let scope = NamespaceScope {
            agent,
            session: session.as_deref(),
            metadata,
        };
        let mut out = Vec::new();
        for (name, spec) in &self.workspace.memories {
            let listed = if write { &spec.writers } else { &spec.readers };
            if !listed.iter().any(|entry| glob_matches(entry, agent)) {
                continue;
            }
            let Some(template) = self.templates.get(name) else {
                continue;
            };
            let namespace = template.render(&scope).map_err(|why| {
                invalid(format!(
                    "Memory `{name}` (namespace `{}`): {why}",
                    spec.namespace
                ))
            })?;
            out.push(Access {
                memory: name.clone(),
                namespace,
            });
        }
        Ok(out)
    }

    /// The `Memory` document a namespace belongs to; an unknown namespace is an error naming
    /// the templates there are.
    pub fn memory_of(&self, namespace: &str) -> Result<&str, RuntimeError> {
        if let Some((name, _)) = self.templates.iter().find(|(_, t)| t.matches(namespace)) {
            return Ok(name);
        }
        let known: Vec<String> = self
            .workspace
            .memories
            .iter()
            .map(|(name, spec)| format!("`{}` ({name})", spec.namespace))
            .collect();
        Err(invalid(match known.is_empty() {
            true => format!(
                "unknown namespace `{namespace}`: the workspace declares no `kind: Memory` document"
            ),
            false => format!(
                "unknown namespace `{namespace}`: it matches no Memory namespace; the namespaces \
                 are {}",
                known.join(", ")
            ),
        }))
    }

    /// A text fit to keep: not empty, within the memory's `maxChars`, secrets redacted.
    fn checked_text(&self, memory: &str, text: &str) -> Result<String, RuntimeError> {
        let spec = self.spec(memory)?;
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("the memory text is empty"));
        }
        let chars = text.chars().count();
        let max = (spec.max_chars as usize).min(keel_types::MAX_MEMORY_TEXT);
        if chars > max {
            return Err(invalid(format!(
                "the memory text has {chars} characters; Memory `{memory}` keeps at most {max} \
                 (`maxChars`)"
            )));
        }
        Ok(self.redactor.redact_text(text))
    }

    fn checked_tags(tags: &[String]) -> Result<Vec<String>, RuntimeError> {
        let mut out: Vec<String> = Vec::new();
        for tag in tags {
            let tag = tag.trim();
            if tag.is_empty() || tag.len() > 64 || tag.chars().any(char::is_whitespace) {
                return Err(invalid(format!(
                    "tag `{tag}`: a tag is one word of at most 64 bytes"
                )));
            }
            if !out.iter().any(|t| t == tag) {
                out.push(tag.to_owned());
            }
        }
        if out.len() > 16 {
            return Err(invalid("a memory record has at most 16 tags"));
        }
        Ok(out)
    }

    fn expires_at(&self, memory: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self
            .spec(memory)?
            .ttl
            .map(|ttl| keel_types::time_after(ttl.0)))
    }

    /// A candidate from a run, decided by its memory's write policy: stored (`auto`), queued
    /// as a durable approval (`approve`) or refused (`reject`). Never waits for a person.
    pub async fn submit(
        &self,
        access: &Access,
        draft: Draft,
        origin: Origin,
    ) -> Result<Submitted, RuntimeError> {
        self.submit_from(access, draft, origin, keel_types::MemorySource::Tool)
            .await
    }

    /// [`Self::submit`] for a candidate from `source` (the tool, or post-run extraction).
    pub async fn submit_from(
        &self,
        access: &Access,
        draft: Draft,
        origin: Origin,
        source: keel_types::MemorySource,
    ) -> Result<Submitted, RuntimeError> {
        let spec = self.spec(&access.memory)?;
        let text = self.checked_text(&access.memory, &draft.text)?;
        let tags = Self::checked_tags(&draft.tags)?;
        let decision: WriteDecision = spec.write.into();
        let candidate = MemoryCandidate {
            namespace: access.namespace.clone(),
            memory: access.memory.clone(),
            kind: draft.kind,
            text: text.clone(),
            tags: tags.clone(),
            provenance: Provenance {
                source,
                request_id: Some(origin.request_id.clone()),
                agent: Some(origin.agent.clone()),
                seq: origin.seq,
                call_id: origin.call_id.clone(),
                at: keel_types::now_rfc3339(),
                approved_by: None,
            },
            expires_at: self.expires_at(&access.memory)?,
        };
        // What the decision came to: the record, the approval or the reason, and the event
        // that follows `runtime.memory.candidate.submitted`.
        let mut decided = Decided::default();
        let (message, follow) = match decision {
            WriteDecision::Auto => {
                let record = self
                    .store
                    .store_memory(&candidate, "auto")
                    .await
                    .map_err(store_error)?;
                decided.record_id = Some(record.id.clone());
                (
                    format!("Remembered as {} in {}.", record.id, record.namespace),
                    Some(EventPayload::MemoryLifecycle {
                        action: keel_types::MemoryAction::Stored,
                        record_id: record.id,
                        version: record.version,
                        namespace: record.namespace,
                        detail: None,
                    }),
                )
            }
            WriteDecision::Approve => {
                let approval = ApprovalRecord {
                    approval_id: keel_types::new_id("apr"),
                    request_id: origin.request_id,
                    root_request_id: None,
                    session_id: origin.session_id,
                    agent: origin.agent,
                    tool: crate::memory::tools::REMEMBER.to_owned(),
                    arguments: serde_json::json!({
                        "namespace": access.namespace,
                        "kind": draft.kind.as_str(),
                        "text": text,
                        "tags": candidate.tags,
                    }),
                    call_id: None,
                    asked_by: format!("Memory/{}", access.memory),
                    ask_reason: Some(format!(
                        "the write policy of Memory `{}` is `approve`",
                        access.memory
                    )),
                    status: ApprovalStatus::Pending,
                    scope: ApprovalScope::Once,
                    decided_by: None,
                    decided_at: None,
                    decision_reason: None,
                    created_at: keel_types::now_rfc3339(),
                    memory: Some(Box::new(candidate)),
                    memory_record: None,
                };
                self.runs.create_approval(&approval).await?;
                decided.approval_id = Some(approval.approval_id.clone());
                (
                    format!(
                        "Submitted for a person's approval ({}); it is kept once approved.",
                        approval.approval_id
                    ),
                    Some(EventPayload::MemoryApprovalRequested {
                        approval_id: approval.approval_id,
                        memory: access.memory.clone(),
                        namespace: access.namespace.clone(),
                        text: text.clone(),
                    }),
                )
            }
            WriteDecision::Reject => {
                let reason = format!(
                    "the write policy of Memory `{}` is `reject`: nothing is kept",
                    access.memory
                );
                let message = format!("Not remembered: {reason}.");
                decided.reason = Some(reason);
                (message, None)
            }
        };
        let submitted = EventPayload::MemoryCandidateSubmitted {
            memory: access.memory.clone(),
            namespace: access.namespace.clone(),
            kind: draft.kind,
            text,
            tags,
            decision,
            call_id: origin.call_id,
            record_id: decided.record_id,
            approval_id: decided.approval_id,
            reason: decided.reason,
        };
        Ok(Submitted {
            decision,
            message,
            events: std::iter::once(submitted).chain(follow).collect(),
        })
    }

    /// Stores a record an operator writes (no write policy: the operator is the approval).
    pub async fn add(
        &self,
        namespace: &str,
        draft: Draft,
        by: &str,
    ) -> Result<MemoryRecord, RuntimeError> {
        let memory = self.memory_of(namespace)?.to_owned();
        let candidate = MemoryCandidate {
            namespace: namespace.to_owned(),
            text: self.checked_text(&memory, &draft.text)?,
            tags: Self::checked_tags(&draft.tags)?,
            kind: draft.kind,
            provenance: Provenance {
                source: keel_types::MemorySource::Operator,
                request_id: None,
                agent: None,
                seq: None,
                call_id: None,
                at: keel_types::now_rfc3339(),
                approved_by: None,
            },
            expires_at: self.expires_at(&memory)?,
            memory,
        };
        self.store
            .store_memory(&candidate, by)
            .await
            .map_err(store_error)
    }

    /// A new version of a record.
    pub async fn update(
        &self,
        id: &str,
        mut update: MemoryUpdate,
        by: &str,
    ) -> Result<MemoryRecord, RuntimeError> {
        let current = self.get(id).await?;
        if let Some(text) = &update.text {
            update.text = Some(self.checked_text(&current.memory, text)?);
        }
        if let Some(tags) = &update.tags {
            update.tags = Some(Self::checked_tags(tags)?);
        }
        if update == MemoryUpdate::default() {
            return Err(invalid("nothing to update: give a text, a kind or tags"));
        }
        self.store
            .update_memory(id, &update, by)
            .await
            .map_err(store_error)
    }

    /// Closes a record as deleted (its history stays).
    pub async fn delete(
        &self,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<MemoryRecord, RuntimeError> {
        self.store
            .delete_memory(id, by, reason)
            .await
            .map_err(store_error)
    }

    /// The latest version of a record.
    pub async fn get(&self, id: &str) -> Result<MemoryRecord, RuntimeError> {
        self.store
            .get_memory(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no memory record `{id}`")))
    }

    /// Every version of a record, oldest first.
    pub async fn history(&self, id: &str) -> Result<Vec<MemoryRecord>, RuntimeError> {
        let versions = self.store.memory_history(id).await?;
        if versions.is_empty() {
            return Err(RuntimeError::NotFound(format!("no memory record `{id}`")));
        }
        Ok(versions)
    }

    /// Records, newest first.
    pub async fn list(&self, filter: &MemoryFilter) -> Result<Vec<MemoryRecord>, RuntimeError> {
        if let Some(namespace) = &filter.namespace {
            self.memory_of(namespace)?;
        }
        Ok(self.store.list_memory(filter).await?)
    }

    /// Searches `namespace`, or every namespace of every memory with none, as recall ranks.
    pub async fn search(
        &self,
        namespace: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, RuntimeError> {
        let accesses = match namespace {
            Some(namespace) => vec![Access {
                memory: self.memory_of(namespace)?.to_owned(),
                namespace: namespace.to_owned(),
            }],
            None => self.known_namespaces().await?,
        };
        self.rank_all(&accesses, query, limit).await
    }

    /// The best `limit` records of all of `accesses` for `query`.
    pub(crate) async fn rank_all(
        &self,
        accesses: &[Access],
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, RuntimeError> {
        let mut hits = Vec::new();
        for access in accesses {
            hits.extend(self.rank(access, query, limit).await?);
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        Ok(hits)
    }

    /// Every namespace that holds an active record (and that a `Memory` document still
    /// declares), with its memory.
    async fn known_namespaces(&self) -> Result<Vec<Access>, RuntimeError> {
        let namespaces = self.store.memory_namespaces().await?;
        Ok(namespaces
            .into_iter()
            .filter_map(|namespace| {
                let memory = self.memory_of(&namespace).ok()?.to_owned();
                Some(Access { memory, namespace })
            })
            .collect())
    }

    /// Every version of every record (of one namespace), in the order they were stored: the
    /// export, one JSON object per line.
    pub async fn export(&self, namespace: Option<&str>) -> Result<String, RuntimeError> {
        let records = self
            .list(&MemoryFilter {
                namespace: namespace.map(str::to_owned),
                all_versions: true,
                oldest_first: true,
                limit: None,
            })
            .await?;
        let mut out = String::new();
        for record in records {
            let line = serde_json::to_string(&record)
                .map_err(|e| RuntimeError::Store(StoreError::Invalid(e.to_string())))?;
            out.push_str(&line);
            out.push('\n');
        }
        Ok(out)
    }

    /// Imports an export: every line must parse, name a known namespace and hold a text fit
    /// to keep; otherwise nothing is imported and the error names the line.
    pub async fn import(&self, jsonl: &str) -> Result<u64, RuntimeError> {
        let mut records = Vec::new();
        for (index, line) in jsonl.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at =
                |why: String| invalid(format!("line {}: {why}; nothing was imported", index + 1));
            let mut record: MemoryRecord =
                serde_json::from_str(line).map_err(|e| at(format!("not a memory record: {e}")))?;
            let memory = self
                .memory_of(&record.namespace)
                .map_err(|e| at(e.to_string()))?;
            if memory != record.memory {
                return Err(at(format!(
                    "namespace `{}` belongs to Memory `{memory}`, not `{}`",
                    record.namespace, record.memory
                )));
            }
            record.text = self
                .checked_text(memory, &record.text)
                .map_err(|e| at(e.to_string()))?;
            records.push(record);
        }
        self.store
            .import_memory(&records)
            .await
            .map_err(store_error)
    }

    /// A consistent copy of the store, taken while it is in use.
    pub async fn backup(&self, to: &std::path::Path) -> Result<(), RuntimeError> {
        Ok(self.store.backup(to).await?)
    }
}
