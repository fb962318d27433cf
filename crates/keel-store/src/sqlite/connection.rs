//! Opening the database: folders, connection settings, the schema version check and the
//! migrations, and the translation of SQLite errors into [`StoreError`]s a person can act on.
//!
//! Order matters at open: the schema version is read *before* anything is written (no WAL
//! switch, no migration), so a database from a newer Keel, or a file that is not a database,
//! is reported and left byte-for-byte as it was.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_types::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags};

/// How long a write waits for another process's write transaction before giving up.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// WAL pages (4 KiB each) at which a commit is followed by a checkpoint: 16 MiB (the writer
/// thread checkpoints itself, see `writer.rs`; before it starts, SQLite's automatic checkpoint
/// uses the same size).
pub(crate) const CHECKPOINT_PAGES: u32 = 4000;

/// The migrations, in order; the schema version is how many of them were applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_tasks.sql"),
    include_str!("../../migrations/0003_approvals.sql"),
    include_str!("../../migrations/0004_run_owner.sql"),
    include_str!("../../migrations/0005_skill_candidates.sql"),
    include_str!("../../migrations/0006_memory.sql"),
    include_str!("../../migrations/0007_run_tree.sql"),
    include_str!("../../migrations/0008_session_index.sql"),
    include_str!("../../migrations/0009_session_owner.sql"),
    include_str!("../../migrations/0010_session_summary.sql"),
    include_str!("../../migrations/0011_run_trace.sql"),
    include_str!("../../migrations/0012_eval_results.sql"),
];

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Creates `dir` (and its parents), with a clear error when that is impossible.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    let Err(error) = fs::create_dir_all(dir) else {
        return Ok(());
    };
    // Name the first existing thing in the way: a file where a folder is needed, or a
    // folder we may not write to.
    let mut probe = Some(dir);
    while let Some(path) = probe {
        if let Ok(meta) = fs::metadata(path) {
            let message = if !meta.is_dir() {
                format!(
                    "{} is not a directory, so the store cannot be created in it",
                    path.display()
                )
            } else if is_unwritable(&error) {
                format!(
                    "the directory is read-only (not writable), so the store folder {} cannot be created: {error}",
                    dir.display()
                )
            } else {
                format!("cannot create the store folder {}: {error}", dir.display())
            };
            return Err(StoreError::Io {
                path: path.display().to_string(),
                message,
            });
        }
        probe = path.parent();
    }
    Err(StoreError::Io {
        path: dir.display().to_string(),
        message: format!("cannot create the store folder: {error}"),
    })
}

fn is_unwritable(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Opens the write connection: checks the schema version first, then switches to WAL, sets
/// durability and applies pending migrations in one transaction.
pub(crate) fn open_writer(db: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db, flags).map_err(|e| open_error(db, &e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| open_error(db, &e))?;
    check_version(db, user_version(&conn).map_err(|e| open_error(db, &e))?)?;
    // SQLite silently opens a write-protected file read-only; say so before any write fails.
    if conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|e| open_error(db, &e))?
    {
        return Err(StoreError::Io {
            path: db.display().to_string(),
            message: "the database file is read-only (not writable); keel needs to write to it"
                .into(),
        });
    }
    switch_to_wal(&conn, db)?;
    // FULL: the WAL is synced inside every commit, so a commit is on disk before any
    // connection, in any process, can read it.
    // A 16 MiB WAL between checkpoints (not SQLite's 4 MiB): each run's hot index page is
    // rewritten by many commits but copied back to the database once per checkpoint, and every
    // checkpoint costs a sync of the database file.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
         PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES};"
    ))
    .map_err(|e| open_error(db, &e))?;
    tune(&conn, db, 64)?;
    migrate(&conn, db)?;
    Ok(conn)
}

/// Switches the database to WAL mode (a no-op once it is). The switch needs the file to itself
/// for a moment, and SQLite answers "busy" at once instead of calling the busy handler, so a
/// process opening a new store while another opens or writes it retries, up to [`BUSY_TIMEOUT`].
fn switch_to_wal(conn: &Connection, db: &Path) -> Result<(), StoreError> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Ok(mode) => break mode,
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(open_error(db, &e)),
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Io {
            path: db.display().to_string(),
            message: format!("cannot switch the database to WAL mode (it stays in {mode} mode)"),
        });
    }
    Ok(())
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Opens a read-only connection for queries; WAL lets it read while the writer writes.
pub(crate) fn open_reader(db: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db, flags).map_err(|e| open_error(db, &e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| open_error(db, &e))?;
    tune(&conn, db, 32)?;
    Ok(conn)
}

/// Settings for speed that do not change the file: a statement cache, and a stable query
/// plan — without it SQLite re-compiles some cached statements whenever a bound value changes
/// (e.g. to test a partial index), which costs more than the statement itself.
fn tune(conn: &Connection, db: &Path, cached_statements: usize) -> Result<(), StoreError> {
    conn.set_prepared_statement_cache_capacity(cached_statements);
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| open_error(db, &e))?;
    Ok(())
}

/// The database's schema version; one newer than this build knows is
/// [`StoreError::Version`].
pub(crate) fn schema_version(conn: &Connection, db: &Path) -> Result<u32, StoreError> {
    let version = user_version(conn).map_err(|e| sql_error(db, &e))?;
    check_version(db, version)?;
    Ok(version)
}

/// The identity of an open database file (device and inode), to notice that the file at the
/// store's path was deleted or replaced while the store kept writing to the old one — which
/// would lose everything written since at the next start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file at `path` (`None` where the platform has no inodes).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            fs::metadata(path).ok().map(|meta| Self {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }

    /// Fails when the file at `path` is gone or is not the one `opened`.
    pub(crate) fn check(opened: Option<Self>, path: &Path) -> Result<(), StoreError> {
        let Some(opened) = opened else {
            return Ok(());
        };
        let gone = |what: &str| StoreError::Io {
            path: path.display().to_string(),
            message: format!(
                "the database file was {what} after the store opened it; keel writes to the old file, so restart it"
            ),
        };
        match Self::of(path) {
            None => Err(gone("deleted or moved")),
            Some(now) if now != opened => Err(gone("replaced")),
            Some(_) => Ok(()),
        }
    }
}

fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

fn check_version(db: &Path, found: u32) -> Result<(), StoreError> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::Version {
            path: db.display().to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Applies the migrations the database lacks, all in one `IMMEDIATE` transaction (so two
/// processes opening a new store at once migrate it once), and records the new version.
fn migrate(conn: &Connection, db: &Path) -> Result<(), StoreError> {
    // The first write of an open: a read-only folder or file shows up here.
    let sql = |e: rusqlite::Error| open_error(db, &e);
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
    let result = (|| {
        // Read again under the write lock: another process may have migrated meanwhile.
        let found = user_version(conn).map_err(sql)?;
        check_version(db, found)?;
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            conn.execute_batch(migration).map_err(|e| StoreError::Io {
                path: db.display().to_string(),
                message: format!("migration {} failed: {e}", index + 1),
            })?;
        }
        if found < SCHEMA_VERSION {
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sql)?;
            tracing::info!(path = %db.display(), from = found, to = SCHEMA_VERSION, "Store schema migrated.");
        }
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT").map_err(sql),
        Err(error) => {
            // Nothing of a failed migration stays.
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

/// Translates an error from opening (or first reading) the database, explaining an
/// unwritable folder or file.
fn open_error(db: &Path, error: &rusqlite::Error) -> StoreError {
    let code = error.sqlite_error_code();
    if matches!(
        code,
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied)
    ) && let Some((path, is_dir)) = unwritable_path(db)
    {
        let message = if is_dir {
            format!(
                "the folder is read-only (not writable); keel needs to create {} and its -wal and -shm files in it ({error})",
                db.display()
            )
        } else {
            format!("the database file is read-only (not writable) ({error})")
        };
        return StoreError::Io {
            path: path.display().to_string(),
            message,
        };
    }
    sql_error(db, error)
}

/// The database file or its folder (then `true`), whichever cannot be written. Probes for
/// real (the permission bits do not tell, e.g. for root or on a read-only mount), but only
/// after an open failed.
fn unwritable_path(db: &Path) -> Option<(PathBuf, bool)> {
    if db.exists()
        && let Err(e) = fs::OpenOptions::new().append(true).open(db)
        && is_unwritable(&e)
    {
        return Some((db.to_path_buf(), false));
    }
    let dir = db.parent()?;
    let probe = dir.join(format!(".keel-write-probe-{}", std::process::id()));
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            None
        }
        Err(e) if is_unwritable(&e) => Some((dir.to_path_buf(), true)),
        Err(_) => None,
    }
}

/// Translates a SQLite error into the store's error, naming the database.
pub(crate) fn sql_error(db: &Path, error: &rusqlite::Error) -> StoreError {
    let path = db.display().to_string();
    let Some(code) = error.sqlite_error_code() else {
        // Not an error of SQLite itself: a column of an unexpected type or similar.
        return StoreError::Corrupt {
            location: path,
            message: error.to_string(),
        };
    };
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::Io {
            path,
            message: format!(
                "the database stayed locked by another process for more than {}s ({error})",
                BUSY_TIMEOUT.as_secs()
            ),
        },
        ErrorCode::NotADatabase => StoreError::Corrupt {
            location: path,
            message: format!("not a SQLite database ({error})"),
        },
        ErrorCode::DatabaseCorrupt => StoreError::Corrupt {
            location: path,
            message: error.to_string(),
        },
        ErrorCode::ReadOnly => StoreError::Io {
            path,
            message: format!("the database is read-only (not writable) ({error})"),
        },
        ErrorCode::DiskFull => StoreError::Io {
            path,
            message: format!("the disk is full ({error})"),
        },
        ErrorCode::ConstraintViolation => StoreError::Invalid(error.to_string()),
        _ => StoreError::Io {
            path,
            message: error.to_string(),
        },
    }
}
