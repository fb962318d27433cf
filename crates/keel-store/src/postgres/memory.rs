//! PLACEHOLDER: the memory helper replaces this file with the real implementation.

use std::path::Path;

use async_trait::async_trait;
use keel_types::{
    MemoryCandidate, MemoryFilter, MemoryHit, MemoryMerge, MemoryRecord, MemoryStore, MemoryUpdate,
    StoreError,
};

fn todo() -> StoreError {
    StoreError::Invalid("memory on PostgreSQL is not written yet".into())
}

pub(super) async fn store_in(
    _conn: &mut sqlx_postgres::PgConnection,
    _shown: &str,
    _candidate: &MemoryCandidate,
    _approved_by: &str,
    _now: &str,
) -> Result<MemoryRecord, StoreError> {
    Err(todo())
}

#[async_trait]
impl MemoryStore for super::PgStore {
    async fn store_memory(
        &self,
        _c: &MemoryCandidate,
        _a: &str,
    ) -> Result<MemoryRecord, StoreError> {
        Err(todo())
    }
    async fn get_memory(&self, _id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        Err(todo())
    }
    async fn memory_history(&self, _id: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        Err(todo())
    }
    async fn list_memory(&self, _f: &MemoryFilter) -> Result<Vec<MemoryRecord>, StoreError> {
        Err(todo())
    }
    async fn memory_namespaces(&self) -> Result<Vec<String>, StoreError> {
        Err(todo())
    }
    async fn search_memory(
        &self,
        _n: &[String],
        _q: &str,
        _l: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        Err(todo())
    }
    async fn update_memory(
        &self,
        _id: &str,
        _u: &MemoryUpdate,
        _b: &str,
    ) -> Result<MemoryRecord, StoreError> {
        Err(todo())
    }
    async fn delete_memory(
        &self,
        _id: &str,
        _b: &str,
        _r: Option<&str>,
    ) -> Result<MemoryRecord, StoreError> {
        Err(todo())
    }
    async fn expire_memory(&self, _n: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        Err(todo())
    }
    async fn merge_memory(&self, _m: &MemoryMerge, _b: &str) -> Result<MemoryRecord, StoreError> {
        Err(todo())
    }
    async fn memory_without_embedding(
        &self,
        _n: &[String],
        _l: usize,
    ) -> Result<Vec<(String, u32, String)>, StoreError> {
        Err(todo())
    }
    async fn set_memory_embedding(&self, _id: &str, _v: u32, _e: &[f32]) -> Result<(), StoreError> {
        Err(todo())
    }
    async fn nearest_memory(
        &self,
        _n: &[String],
        _e: &[f32],
        _l: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        Err(todo())
    }
    async fn import_memory(&self, _r: &[MemoryRecord]) -> Result<u64, StoreError> {
        Err(todo())
    }
    async fn backup(&self, _to: &Path) -> Result<(), StoreError> {
        Err(todo())
    }
}
