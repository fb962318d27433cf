-- Long-term memory. One row per version of a record: an update, deletion, expiry or merge
-- closes the current version (`status`, `valid_to` in `record`) and, for updates and merges,
-- inserts the next; nothing is rewritten in place except that closing. `record` is the whole
-- version as JSON; the columns are what lists, recall and maintenance filter on.
CREATE TABLE memory_records (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    namespace  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('active', 'superseded', 'deleted', 'expired')),
    valid_from TEXT NOT NULL,
    expires_at TEXT,
    record     TEXT NOT NULL,
    embedding  BLOB,             -- little-endian f32s, when embeddings are configured
    UNIQUE (id, version)
);
CREATE INDEX memory_by_namespace ON memory_records (namespace, status, valid_from DESC);
CREATE INDEX memory_by_start ON memory_records (valid_from DESC, seq DESC);
CREATE INDEX memory_expiring ON memory_records (expires_at)
    WHERE status = 'active' AND expires_at IS NOT NULL;

-- Full-text index of the ACTIVE versions only (rowid = memory_records.seq): a version enters
-- when it is stored and leaves when it is closed, in the same transaction. `ns` holds one
-- token naming the record's namespace (`n` + a 64-bit hash in hex), so a recall filters by
-- namespace inside the index and ranks only its own records (bm25 weight 0 for `ns`).
CREATE VIRTUAL TABLE memory_fts USING fts5 (text, tags, ns, tokenize = 'unicode61 remove_diacritics 2');

-- How many active versions each namespace holds ('' = all of them): recall asks the index
-- for a namespace's records only when the namespace is a small part of it, and otherwise
-- ranks without the filter (cheaper) and drops other namespaces' records.
CREATE TABLE memory_namespaces (
    namespace TEXT PRIMARY KEY,
    active    INTEGER NOT NULL
) WITHOUT ROWID;
