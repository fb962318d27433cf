-- The trace a run belongs to (JSON: `{traceId, parentSpanId?, remoteParent?, sampled,
-- tracestate?}`): its first attempt's trace id and the span it runs under, so a resumed
-- attempt can link to it and a child run can be placed under its parent's call.
ALTER TABLE runs ADD COLUMN trace TEXT;
