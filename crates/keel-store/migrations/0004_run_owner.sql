-- The principal that created a run (e.g. the name of the server's API key); not the process
-- that runs it (`owner_pid`…). NULL for runs made before, or without one.
ALTER TABLE runs ADD COLUMN owner TEXT;
-- Only runs with an owner are indexed, so runs without one cost nothing more to insert.
CREATE INDEX runs_by_owner ON runs (owner, started_at DESC, request_id DESC)
    WHERE owner IS NOT NULL;
