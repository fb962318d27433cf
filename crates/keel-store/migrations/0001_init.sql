-- Keel store schema, version 1. Applied once, in one transaction, by `migrate`.
-- Timestamps are RFC 3339 UTC text with fixed-width milliseconds, so they sort as text.

-- Conversations spanning requests.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    agent      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);

-- One row per request: the run record as columns. `owner_*` name the process running it
-- (pid, start time in clock ticks after boot, boot id) so a crashed owner can be detected.
CREATE TABLE runs (
    request_id    TEXT PRIMARY KEY NOT NULL,
    session_id    TEXT,
    agent         TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting_approval',
                      'completed', 'failed', 'cancelled', 'interrupted')),
    input         TEXT NOT NULL,
    output        TEXT,
    error         TEXT,             -- ErrorInfo as JSON
    finish_reason TEXT,
    usage         TEXT NOT NULL,    -- Usage as JSON
    steps         INTEGER NOT NULL DEFAULT 0,
    started_at    TEXT NOT NULL,
    ended_at      TEXT,
    event_count   INTEGER NOT NULL DEFAULT 0,
    parent_id     TEXT,
    retry_of      TEXT,
    replay_of     TEXT,
    forked_from   TEXT,
    fork_seq      INTEGER,
    resumed       INTEGER NOT NULL DEFAULT 0,
    owner_pid     INTEGER,
    owner_start   INTEGER,
    owner_boot    TEXT
);
CREATE INDEX runs_by_start ON runs (started_at DESC, request_id DESC);
CREATE INDEX runs_by_status ON runs (status, started_at DESC, request_id DESC);
CREATE INDEX runs_by_agent ON runs (agent, started_at DESC, request_id DESC);
CREATE INDEX runs_by_session ON runs (session_id, started_at DESC, request_id DESC);
CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_by_retry ON runs (retry_of) WHERE retry_of IS NOT NULL;
CREATE INDEX runs_by_replay ON runs (replay_of) WHERE replay_of IS NOT NULL;
CREATE INDEX runs_by_fork ON runs (forked_from) WHERE forked_from IS NOT NULL;

-- The durable run log: append-only, one row per event, `body` is the whole event as JSON
-- (exactly the line of the JSONL mirror). A rowid table on purpose: rows are stored in append
-- order, so the events of many concurrent runs committed together share pages (a clustered
-- `WITHOUT ROWID` table would dirty one 4 KiB page per run per commit, and large bodies would
-- spill to overflow pages sooner); the primary key is the index that keeps `seq` unique.
CREATE TABLE events (
    request_id TEXT NOT NULL REFERENCES runs (request_id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    ts         TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (request_id, seq)
);

-- Session transcripts, dense in `seq` per session. `request_id` is the request that added the
-- message (its run may have been pruned since).
CREATE TABLE session_messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    request_id TEXT NOT NULL,
    message    TEXT NOT NULL,       -- Message as JSON
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

-- Tool calls waiting for (or decided by) a person. Ready for the governance work.
CREATE TABLE approvals (
    id         TEXT PRIMARY KEY NOT NULL,
    request_id TEXT NOT NULL REFERENCES runs (request_id) ON DELETE CASCADE,
    session_id TEXT,
    tool       TEXT NOT NULL,
    arguments  TEXT NOT NULL,       -- JSON
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    reason     TEXT
);
CREATE INDEX approvals_by_status ON approvals (status, created_at);
CREATE INDEX approvals_by_request ON approvals (request_id);

-- Direct tool calls run as tasks (MCP task primitives, `tools call`). Ready for later work.
CREATE TABLE tasks (
    id         TEXT PRIMARY KEY NOT NULL,
    request_id TEXT,
    tool       TEXT NOT NULL,
    arguments  TEXT NOT NULL,       -- JSON
    decision   TEXT,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    ended_at   TEXT
);
CREATE INDEX tasks_by_status ON tasks (status, created_at);
