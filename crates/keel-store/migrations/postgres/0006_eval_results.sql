-- The results of evaluations (`keel eval run`), shared by the replicas: the row keeps the
-- whole result as JSON text plus the columns lists filter and sort on.
CREATE TABLE eval_results (
    id          TEXT PRIMARY KEY,
    eval        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    record      TEXT NOT NULL
);
CREATE INDEX eval_results_by_eval ON eval_results (eval, started_at DESC, id DESC);
CREATE INDEX eval_results_by_started ON eval_results (started_at DESC, id DESC);
