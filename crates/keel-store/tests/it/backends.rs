//! The store contract runs on both backends: each contract test is written once against
//! [`Backend`] (a `RunStore` + `MemoryStore`) and instantiated by [`contract!`] as a SQLite
//! test (a fresh temp workspace) and a PostgreSQL test (a fresh schema in the local database,
//! `KEEL_TEST_DATABASE_URL` or `postgres://postgres@127.0.0.1:5432/test`, dropped afterwards).

use std::sync::Arc;

use keel_store::{PgOptions, PgStore, SqliteStore};
use keel_types::{MemoryStore, RunStore};

pub(crate) use keel_test_support::database_url;

/// A schema name no other test uses.
pub(crate) fn fresh_schema() -> String {
    format!("t_{}", uuid::Uuid::now_v7().simple())
}

/// Options for a store in its own schema.
pub(crate) fn pg_options(schema: &str) -> PgOptions {
    PgOptions {
        schema: Some(schema.to_owned()),
        lease_ttl: std::time::Duration::from_secs(5),
        ..PgOptions::new(database_url())
    }
}

/// One backend under test; dropping it deletes what it stored (the temp folder, or the
/// schema).
pub(crate) struct Backend {
    pub kind: &'static str,
    store: Arc<dyn Both>,
    pub sqlite: Option<SqliteStore>,
    pub postgres: Option<PgStore>,
    _dir: Option<tempfile::TempDir>,
    schema: Option<String>,
}

/// Both ports at once.
pub(crate) trait Both: RunStore + MemoryStore {}
impl<T: RunStore + MemoryStore> Both for T {}

impl Backend {
    pub(crate) fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        Self {
            kind: "sqlite",
            store: Arc::new(store.clone()),
            sqlite: Some(store),
            postgres: None,
            _dir: Some(dir),
            schema: None,
        }
    }

    pub(crate) async fn postgres() -> Self {
        let schema = fresh_schema();
        let store = PgStore::connect(pg_options(&schema)).await.unwrap();
        Self {
            kind: "postgres",
            store: Arc::new(store.clone()),
            sqlite: None,
            postgres: Some(store),
            _dir: None,
            schema: Some(schema),
        }
    }

    /// The PostgreSQL schema (empty for SQLite).
    pub(crate) fn schema_name(&self) -> &str {
        self.schema.as_deref().unwrap_or_default()
    }

    /// The store, as both ports.
    pub(crate) fn store(&self) -> &dyn Both {
        self.store.as_ref()
    }

    /// A fresh, empty store of the same kind (another workspace, another schema).
    pub(crate) async fn another(&self) -> Backend {
        match self.kind {
            "sqlite" => Backend::sqlite(),
            _ => Backend::postgres().await,
        }
    }

    /// The store to move into tasks.
    pub(crate) fn shared(&self) -> Arc<dyn Both> {
        self.store.clone()
    }

    /// The group-commit writer's totals.
    pub(crate) fn write_stats(&self) -> keel_store::WriteStats {
        match (&self.sqlite, &self.postgres) {
            (Some(sqlite), _) => sqlite.write_stats(),
            (None, Some(postgres)) => postgres.write_stats(),
            (None, None) => unreachable!("a backend is SQLite or PostgreSQL"),
        }
    }

    /// On SQLite, the run's JSONL mirror holds exactly the stored events (PostgreSQL keeps
    /// no mirror).
    pub(crate) async fn assert_mirror(&self, id: &str) {
        if let Some(sqlite) = &self.sqlite {
            crate::assert_mirror_matches(sqlite, id).await;
        }
    }

    /// The store as the runtime sees it.
    pub(crate) fn runs(&self) -> &dyn RunStore {
        self.store.as_ref()
    }

    /// Another handle on the same stored data, as a second process would open it.
    pub(crate) async fn reopen(&self) -> Arc<dyn Both> {
        match (&self.sqlite, &self.schema) {
            (Some(sqlite), _) => {
                let root = sqlite.db_path().parent().unwrap().parent().unwrap();
                Arc::new(SqliteStore::open_with(root, keel_store::MirrorLayout::PerRun).unwrap())
            }
            (None, Some(schema)) => Arc::new(PgStore::connect(pg_options(schema)).await.unwrap()),
            (None, None) => unreachable!("a backend is SQLite or PostgreSQL"),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let Some(schema) = self.schema.take() else {
            return;
        };
        // The test's runtime may be gone: drop the schema from a runtime of our own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(store) = PgStore::lazy(pg_options(&schema)) {
                    let _ = store.drop_schema().await;
                }
            });
        })
        .join();
    }
}

/// Instantiates contract tests `async fn name(backend: &Backend)` on both backends:
/// `sqlite::name` and `postgres::name`.
#[macro_export]
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(&$crate::backends::Backend::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&$crate::backends::Backend::postgres().await).await;
                }
            )*
        }
    };
}
