-- Approvals keep their whole record (agent, call, who asked, scope, decision) as JSON.
ALTER TABLE approvals ADD COLUMN record TEXT NOT NULL DEFAULT '{}';
CREATE INDEX approvals_by_created ON approvals (created_at DESC, id DESC);
