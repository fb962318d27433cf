//! The stores a runtime uses when none is injected, chosen by the Runtime document's
//! `store`: the workspace's SQLite database (`.keel/keel.db`) by default, or PostgreSQL
//! (`store: {kind: postgres, url: ...}`); artifacts in `.keel/artifacts`, a shared folder
//! (`store.artifacts.path`) or the PostgreSQL database (`store.artifacts.kind: database`).

use std::sync::Arc;

use keel_types::{ArtifactStore, MemoryStore, RunStore};
use keel_workspace::Workspace;

use crate::Error;

/// The run store, the memory store it doubles as, and the PostgreSQL store when it is one
/// (for artifacts kept in the database).
pub(crate) struct DefaultStores {
    pub runs: Arc<dyn RunStore>,
    pub memory: Option<Arc<dyn MemoryStore>>,
    #[cfg(feature = "postgres")]
    pub postgres: Option<keel_store::PgStore>,
}

/// The store the runs and the memory share by default.
#[cfg(feature = "sqlite")]
pub(crate) fn default_store(workspace: &Workspace) -> Result<DefaultStores, Error> {
    match workspace.runtime.store.backend() {
        keel_workspace::StoreKind::Sqlite => {
            let store = Arc::new(keel_store::SqliteStore::open_with(
                &workspace.root,
                mirror_layout(workspace),
            )?);
            Ok(DefaultStores {
                runs: store.clone(),
                memory: Some(store),
                #[cfg(feature = "postgres")]
                postgres: None,
            })
        }
        keel_workspace::StoreKind::Postgres => postgres_store(workspace),
    }
}

#[cfg(not(feature = "sqlite"))]
pub(crate) fn default_store(_workspace: &Workspace) -> Result<DefaultStores, Error> {
    Err(Error::NoStore("run store", "store"))
}

/// The SQLite store's mirror layout the workspace asks for.
#[cfg(feature = "sqlite")]
pub fn mirror_layout(workspace: &Workspace) -> keel_store::MirrorLayout {
    match workspace.runtime.store.mirror {
        keel_workspace::MirrorSpec::Segments => keel_store::MirrorLayout::Segments,
        keel_workspace::MirrorSpec::PerRun => keel_store::MirrorLayout::PerRun,
    }
}

/// The connection settings of the workspace's PostgreSQL store.
#[cfg(feature = "postgres")]
pub fn postgres_options(workspace: &Workspace) -> keel_store::PgOptions {
    let spec = &workspace.runtime.store;
    keel_store::PgOptions {
        schema: spec.schema.clone(),
        lease_ttl: spec.lease_ttl.0,
        replica: std::env::var("KEEL_REPLICA").ok().filter(|r| !r.is_empty()),
        ..keel_store::PgOptions::new(spec.url.clone())
    }
}

#[cfg(feature = "postgres")]
fn postgres_store(workspace: &Workspace) -> Result<DefaultStores, Error> {
    // Connects (and migrates) at first use: building stays synchronous.
    let store = keel_store::PgStore::lazy(postgres_options(workspace))?;
    Ok(DefaultStores {
        runs: Arc::new(store.clone()),
        memory: Some(Arc::new(store.clone())),
        postgres: Some(store),
    })
}

#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
fn postgres_store(_workspace: &Workspace) -> Result<DefaultStores, Error> {
    Err(Error::InvalidInput(
        "the workspace's store is PostgreSQL, but this build of keel has no PostgreSQL store \
         (cargo feature `postgres`)"
            .into(),
    ))
}

/// Where artifacts go by default.
#[cfg(feature = "sqlite")]
pub(crate) fn default_artifacts(
    workspace: &Workspace,
    stores: Option<&DefaultStores>,
) -> Result<Arc<dyn ArtifactStore>, Error> {
    let spec = &workspace.runtime.store.artifacts;
    match spec.kind {
        keel_workspace::ArtifactsKind::Filesystem => Ok(Arc::new(match &spec.path {
            Some(path) => keel_store::FsArtifacts::at(workspace.root.join(path)),
            None => keel_store::FsArtifacts::open(&workspace.root),
        })),
        keel_workspace::ArtifactsKind::Database => {
            #[cfg(feature = "postgres")]
            if let Some(store) = stores.and_then(|s| s.postgres.clone()) {
                return Ok(Arc::new(keel_store::PgArtifacts::new(store)));
            }
            let _ = stores;
            Err(Error::InvalidInput(
                "`store.artifacts.kind: database` needs the workspace's PostgreSQL store (or \
                 give the builder an artifact store)"
                    .into(),
            ))
        }
    }
}

#[cfg(not(feature = "sqlite"))]
pub(crate) fn default_artifacts(
    _workspace: &Workspace,
    _stores: Option<&DefaultStores>,
) -> Result<Arc<dyn ArtifactStore>, Error> {
    Err(Error::NoStore("artifact store", "artifacts"))
}
