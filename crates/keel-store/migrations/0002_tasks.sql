-- Tasks keep their whole record (decision, issues, repairs, output) as JSON, and the agent
-- whose inventory they use.
ALTER TABLE tasks ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN record TEXT NOT NULL DEFAULT '{}';
CREATE INDEX tasks_by_created ON tasks (created_at DESC, id DESC);
