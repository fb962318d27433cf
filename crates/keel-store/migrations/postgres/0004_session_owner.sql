-- A session's owner: the principal (API key name and `metadata.user`, as JSON text) that
-- created it. Only that principal may continue the session. Sessions created before this
-- migration have none (NULL) and stay usable by anyone.
ALTER TABLE sessions ADD COLUMN owner text;
