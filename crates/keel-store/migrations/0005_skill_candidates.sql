-- Skills agents proposed (`propose_skill`), waiting for a person's decision. The row keeps the
-- whole record as JSON plus the columns lists filter and sort on.
CREATE TABLE skill_candidates (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL,
    request_id  TEXT,
    created_at  TEXT NOT NULL,
    record      TEXT NOT NULL
);
CREATE INDEX skill_candidates_by_created ON skill_candidates (created_at DESC, id DESC);
