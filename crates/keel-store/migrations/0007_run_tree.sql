-- Subagents and workflows: a run knows the first run of its tree (`root_id`, with the
-- existing `parent_id`) and the parent's call or node it answers (`parent_call`); a run with
-- a structured output keeps it as JSON (`value`). Only runs in a tree are indexed.
ALTER TABLE runs ADD COLUMN root_id TEXT;
ALTER TABLE runs ADD COLUMN parent_call TEXT;
ALTER TABLE runs ADD COLUMN value TEXT;
CREATE INDEX runs_by_root ON runs (root_id, started_at) WHERE root_id IS NOT NULL;
