//! [`PgArtifacts`]: artifacts kept in the database (`artifacts: {kind: database}`), so every
//! replica reads what any replica wrote without a shared filesystem. The content is stored in
//! chunks of at most 1 MiB (`artifact_chunks`), with the record and its sha256 in `artifacts`,
//! in one transaction; a read checks the sha256.

use async_trait::async_trait;
use keel_types::{ArtifactRecord, ArtifactStore, RequestId, StoreError, artifact_id};
use sha2::{Digest, Sha256};
use sqlx_core::row::Row;
use sqlx_postgres::Postgres;

use super::{PgStore, corrupt, to_json};

/// The largest chunk stored in one row.
const CHUNK: usize = 1 << 20;

/// Artifacts in the PostgreSQL store's database.
#[derive(Debug, Clone)]
pub struct PgArtifacts {
    store: PgStore,
}

impl PgArtifacts {
    pub fn new(store: PgStore) -> Self {
        Self { store }
    }
}

#[async_trait]
impl ArtifactStore for PgArtifacts {
    async fn put(
        &self,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<ArtifactRecord, StoreError> {
        let store = &self.store;
        store.ready().await?;
        let e = |e: sqlx_core::Error| store.db_error(&e);
        let record = crate::artifacts::record_for(request_id, name, media_type, content);
        let mut tx = store.pool().begin().await.map_err(e)?;
        sqlx_core::query::query::<Postgres>(
            "INSERT INTO artifacts (id, request_id, created_at, record) VALUES ($1, $2, $3, $4)",
        )
        .bind(&record.id)
        .bind(request_id.as_str())
        .bind(&record.created_at)
        .bind(to_json(&record)?)
        .execute(&mut *tx)
        .await
        .map_err(e)?;
        for (n, chunk) in content.chunks(CHUNK).enumerate() {
            sqlx_core::query::query::<Postgres>(
                "INSERT INTO artifact_chunks (artifact_id, n, content) VALUES ($1, $2, $3)",
            )
            .bind(&record.id)
            .bind(i32::try_from(n).unwrap_or(i32::MAX))
            .bind(chunk)
            .execute(&mut *tx)
            .await
            .map_err(e)?;
        }
        tx.commit().await.map_err(e)?;
        Ok(record)
    }

    async fn get(&self, uri: &str) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError> {
        let Some(id) = artifact_id(uri) else {
            return Err(StoreError::Invalid(keel_types::artifact_id_problem(uri)));
        };
        let store = &self.store;
        store.ready().await?;
        let e = |e: sqlx_core::Error| store.db_error(&e);
        let row =
            sqlx_core::query::query::<Postgres>("SELECT record::text FROM artifacts WHERE id = $1")
                .bind(id)
                .fetch_optional(store.pool())
                .await
                .map_err(e)?;
        let Some(row) = row else { return Ok(None) };
        let text: String = row.try_get(0).map_err(e)?;
        let record: ArtifactRecord =
            serde_json::from_str(&text).map_err(|err| corrupt("artifacts", id, &err))?;
        let chunks = sqlx_core::query::query::<Postgres>(
            "SELECT content FROM artifact_chunks WHERE artifact_id = $1 ORDER BY n",
        )
        .bind(id)
        .fetch_all(store.pool())
        .await
        .map_err(e)?;
        let mut content = Vec::with_capacity(usize::try_from(record.bytes).unwrap_or(0));
        for chunk in chunks {
            let bytes: Vec<u8> = chunk.try_get(0).map_err(e)?;
            content.extend_from_slice(&bytes);
        }
        if keel_types::to_hex(&Sha256::digest(&content)) != record.sha256 {
            return Err(StoreError::Corrupt {
                location: format!("artifacts `{id}`"),
                message: "the content does not match its recorded sha256".into(),
            });
        }
        Ok(Some((record, content)))
    }
}
