-- Long-term memory. One row per version of a record: an update, deletion, expiry or merge
-- closes the current version (`status`, `validTo` in `record`) and, for updates and merges,
-- inserts the next, in one transaction; nothing else is changed in place. `record` is the
-- whole version as JSON; the columns are what lists, recall and maintenance filter on.
-- `search` is the full-text vector of an ACTIVE version, NULL once it is closed: its text's
-- and tags' words as the SQLite store's tokenizer splits them (runs of letters and digits,
-- lower-cased, Latin diacritics removed; split by keel, so PostgreSQL's parser sees plain
-- words) under the `simple` configuration (no stemming, no stop words).
CREATE TABLE memory_records (
    seq        bigserial PRIMARY KEY,
    id         text NOT NULL,
    version    integer NOT NULL CHECK (version >= 1),
    namespace  text NOT NULL,
    status     text NOT NULL CHECK (status IN ('active', 'superseded', 'deleted', 'expired')),
    valid_from text NOT NULL,
    expires_at text,
    record     jsonb NOT NULL,
    embedding  real[],
    search     tsvector,
    UNIQUE (id, version)
);
CREATE INDEX memory_by_namespace ON memory_records (namespace, status, valid_from DESC);
CREATE INDEX memory_by_start ON memory_records (valid_from DESC, seq DESC);
CREATE INDEX memory_expiring ON memory_records (expires_at)
    WHERE status = 'active' AND expires_at IS NOT NULL;
CREATE INDEX memory_search ON memory_records USING gin (search) WHERE status = 'active';
