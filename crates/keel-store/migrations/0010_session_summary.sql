-- A session's compacted history: a summary of its transcript up to a message (JSON:
-- `{text, throughSeq, at}`). Runs of the session send it instead of those messages; the
-- transcript itself keeps every turn.
ALTER TABLE sessions ADD COLUMN summary TEXT;
