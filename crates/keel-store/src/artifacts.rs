//! Artifacts on the local filesystem: `.keel/artifacts/<id>/content` and `meta.json` (the
//! [`ArtifactRecord`]). Content is written first and the record last, each through a
//! temporary file and a rename, so a record never points at missing or partial content.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use keel_types::{
    ARTIFACT_URI_PREFIX, ArtifactRecord, ArtifactStore, RequestId, StoreError, artifact_id,
};
use sha2::{Digest, Sha256};

const CONTENT: &str = "content";
const META: &str = "meta.json";

/// Artifacts of a workspace, under `<root>/.keel/artifacts`.
#[derive(Debug, Clone)]
pub struct FsArtifacts {
    dir: PathBuf,
}

impl FsArtifacts {
    /// The artifact folder of the workspace at `workspace_root` (created on first write).
    pub fn open(workspace_root: &Path) -> Self {
        Self {
            dir: workspace_root.join(".keel").join("artifacts"),
        }
    }

    /// Artifacts in `dir` (e.g. a filesystem shared by every replica).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn put_blocking(
        dir: &Path,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<ArtifactRecord, StoreError> {
        let record = record_for(request_id, name, media_type, content);
        let folder = dir.join(&record.id);
        std::fs::create_dir_all(&folder).map_err(|e| io(&folder, &e))?;
        write_atomic(&folder.join(CONTENT), content)?;
        let meta =
            serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Invalid(e.to_string()))?;
        write_atomic(&folder.join(META), &meta)?;
        Ok(record)
    }

    fn get_blocking(
        dir: &Path,
        uri: &str,
    ) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError> {
        let Some(id) = artifact_id(uri) else {
            return Err(StoreError::Invalid(keel_types::artifact_id_problem(uri)));
        };
        let folder = dir.join(id);
        let meta_path = folder.join(META);
        let meta = match std::fs::read(&meta_path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&meta_path, &e)),
        };
        let record: ArtifactRecord =
            serde_json::from_slice(&meta).map_err(|e| StoreError::Corrupt {
                location: meta_path.display().to_string(),
                message: e.to_string(),
            })?;
        let content_path = folder.join(CONTENT);
        let content = std::fs::read(&content_path).map_err(|e| io(&content_path, &e))?;
        if keel_types::to_hex(&Sha256::digest(&content)) != record.sha256 {
            return Err(StoreError::Corrupt {
                location: content_path.display().to_string(),
                message: "the content does not match its recorded sha256".into(),
            });
        }
        Ok(Some((record, content)))
    }
}

#[async_trait]
impl ArtifactStore for FsArtifacts {
    async fn put(
        &self,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<ArtifactRecord, StoreError> {
        self.put_owned(request_id, name, media_type, content.to_vec())
            .await
    }

    async fn put_owned(
        &self,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: Vec<u8>,
    ) -> Result<ArtifactRecord, StoreError> {
        let (dir, request_id, name, media_type) = (
            self.dir.clone(),
            request_id.clone(),
            name.to_owned(),
            media_type.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            Self::put_blocking(&dir, &request_id, &name, &media_type, &content)
        })
        .await
        .map_err(|e| StoreError::Invalid(e.to_string()))?
    }

    async fn get(&self, uri: &str) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError> {
        let (dir, uri) = (self.dir.clone(), uri.to_owned());
        tokio::task::spawn_blocking(move || Self::get_blocking(&dir, &uri))
            .await
            .map_err(|e| StoreError::Invalid(e.to_string()))?
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, &e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, &e))
}

/// The record of new content: a fresh id and URI, its size and sha256, the time now.
pub(crate) fn record_for(
    request_id: &RequestId,
    name: &str,
    media_type: &str,
    content: &[u8],
) -> ArtifactRecord {
    let id = keel_types::new_id("art");
    ArtifactRecord {
        uri: format!("{ARTIFACT_URI_PREFIX}{id}"),
        id,
        request_id: request_id.clone(),
        name: name.to_owned(),
        media_type: media_type.to_owned(),
        bytes: content.len() as u64,
        sha256: keel_types::to_hex(&Sha256::digest(content)),
        created_at: keel_types::now_rfc3339(),
    }
}

fn io(path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn artifacts_round_trip_and_damage_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsArtifacts::open(dir.path());
        let record = store
            .put(
                &RequestId::from("run_1"),
                "shell output",
                "text/plain",
                b"hello",
            )
            .await
            .unwrap();
        assert!(record.uri.starts_with("keel://artifacts/art_"));
        assert_eq!(record.bytes, 5);
        let (got, content) = store.get(&record.uri).await.unwrap().unwrap();
        assert_eq!((got, content.as_slice()), (record.clone(), &b"hello"[..]));
        assert!(
            store
                .get("keel://artifacts/art_nope")
                .await
                .unwrap()
                .is_none()
        );
        assert!(store.get("keel://artifacts/../../etc").await.is_err());

        std::fs::write(
            dir.path()
                .join(".keel/artifacts")
                .join(&record.id)
                .join(CONTENT),
            b"HELLO",
        )
        .unwrap();
        assert!(matches!(
            store.get(&record.id).await,
            Err(StoreError::Corrupt { .. })
        ));
    }
}
