-- Only runs in a session are indexed by session: a run without one (most API and SDK
-- requests) no longer writes an index entry for NULL when it is created. Lookups by session
-- (`session_id = ?`) use the partial index as before.
DROP INDEX runs_by_session;
CREATE INDEX runs_by_session ON runs (session_id, started_at DESC, request_id DESC)
    WHERE session_id IS NOT NULL;
