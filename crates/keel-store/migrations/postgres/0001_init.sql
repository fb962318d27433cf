-- Keel's PostgreSQL schema, version 1. Applied once, in one transaction, by `migrate` (under
-- an advisory lock, so replicas starting together apply it once). Times taken from records
-- are RFC 3339 UTC text with fixed-width milliseconds, as in the SQLite store, so they sort
-- as text and round-trip exactly; lease times are the database's own clock (timestamptz).

CREATE TABLE sessions (
    id         text PRIMARY KEY,
    agent      text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL
);
CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);

-- The processes (replicas) that own runs. A lease is renewed by heartbeat; `token` comes from
-- one sequence, so a replica that lost its lease and registers again never reuses a token.
CREATE SEQUENCE lease_tokens;
CREATE TABLE leases (
    token        bigint PRIMARY KEY,
    replica      text NOT NULL,
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL
);

-- One row per request. `record` is the whole run record as JSON; the columns are what lists
-- filter and sort on. `owner_token` names the lease of the process running it (NULL while
-- queued or ended); every append checks it (fencing). `last_seq` is the last stored event.
-- `queued` holds the request of a queued run until a replica claims it.
CREATE TABLE runs (
    request_id  text PRIMARY KEY,
    session_id  text,
    agent       text NOT NULL,
    status      text NOT NULL CHECK (status IN ('queued', 'running', 'waiting_approval',
                    'completed', 'failed', 'cancelled', 'interrupted')),
    started_at  text NOT NULL,
    owner       text,
    parent_id   text,
    root_id     text,
    record      jsonb NOT NULL,
    last_seq    bigint NOT NULL DEFAULT 0,
    owner_token bigint,
    queued      jsonb
);
CREATE INDEX runs_by_start ON runs (started_at DESC, request_id DESC);
CREATE INDEX runs_by_status ON runs (status, started_at DESC, request_id DESC);
CREATE INDEX runs_by_agent ON runs (agent, started_at DESC, request_id DESC);
CREATE INDEX runs_by_session ON runs (session_id, started_at DESC, request_id DESC)
    WHERE session_id IS NOT NULL;
CREATE INDEX runs_by_owner ON runs (owner, started_at DESC, request_id DESC)
    WHERE owner IS NOT NULL;
CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_by_root ON runs (root_id, started_at) WHERE root_id IS NOT NULL;
CREATE INDEX runs_by_lease ON runs (owner_token) WHERE owner_token IS NOT NULL;
CREATE INDEX runs_queued ON runs (started_at, request_id) WHERE status = 'queued';

-- The durable run log: append-only, `body` is the whole event as JSON (a JSONL line).
CREATE TABLE events (
    request_id text NOT NULL REFERENCES runs (request_id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq >= 1),
    type       text NOT NULL,
    body       text NOT NULL,
    PRIMARY KEY (request_id, seq)
);
CREATE INDEX events_by_type ON events (type) WHERE type IN ('runtime.tool.guard', 'runtime.adapter.event');

CREATE TABLE session_messages (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq >= 1),
    request_id text NOT NULL,
    message    text NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE approvals (
    id         text PRIMARY KEY,
    request_id text NOT NULL REFERENCES runs (request_id) ON DELETE CASCADE,
    status     text NOT NULL,
    created_at text NOT NULL,
    record     jsonb NOT NULL
);
CREATE INDEX approvals_by_created ON approvals (created_at DESC, id DESC);
CREATE INDEX approvals_by_status ON approvals (status, created_at DESC, id DESC);
CREATE INDEX approvals_by_request ON approvals (request_id);

CREATE TABLE tasks (
    id         text PRIMARY KEY,
    created_at text NOT NULL,
    record     jsonb NOT NULL
);
CREATE INDEX tasks_by_created ON tasks (created_at DESC, id DESC);

CREATE TABLE skill_candidates (
    id         text PRIMARY KEY,
    status     text NOT NULL,
    created_at text NOT NULL,
    record     jsonb NOT NULL
);
CREATE INDEX skill_candidates_by_created ON skill_candidates (created_at DESC, id DESC);

-- Artifacts kept in the database (`artifacts: {kind: database}`): metadata, and the content
-- in chunks of at most 1 MiB, so no single value is large.
CREATE TABLE artifacts (
    id         text PRIMARY KEY,
    request_id text NOT NULL,
    created_at text NOT NULL,
    record     jsonb NOT NULL
);
CREATE TABLE artifact_chunks (
    artifact_id text NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    n           integer NOT NULL,
    content     bytea NOT NULL,
    PRIMARY KEY (artifact_id, n)
);
