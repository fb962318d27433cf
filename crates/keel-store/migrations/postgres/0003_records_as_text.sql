-- Records are kept as JSON text, not jsonb: jsonb cannot hold a NUL character (`\u0000`),
-- which a model's answer or a tool's output may contain, and a record must round-trip
-- exactly. Lists filter on the columns beside the record; a run's `status` column is the
-- truth for its status (the record's is overwritten from it when read), so replicas change a
-- run's status without rewriting its record.
ALTER TABLE runs ALTER COLUMN record TYPE text USING record::text;
ALTER TABLE runs ALTER COLUMN queued TYPE text USING queued::text;
ALTER TABLE approvals ALTER COLUMN record TYPE text USING record::text;
ALTER TABLE tasks ALTER COLUMN record TYPE text USING record::text;
ALTER TABLE skill_candidates ALTER COLUMN record TYPE text USING record::text;
ALTER TABLE artifacts ALTER COLUMN record TYPE text USING record::text;
ALTER TABLE memory_records ALTER COLUMN record TYPE text USING record::text;
