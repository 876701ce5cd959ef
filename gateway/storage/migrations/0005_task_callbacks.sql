-- The task engine's callback outbox: a callback is written in the same transaction as the status
-- change it reports (so it is queued exactly once, by the replica whose compare-and-swap won) and
-- deleted once delivered or given up; a replica that dies while sending leaves a lease that
-- expires, and another sends it. Callbacks of one task leave in order (lowest id first).

CREATE TABLE task_callbacks (
    id {pk},
    task_id TEXT NOT NULL,
    url TEXT NOT NULL,
    body TEXT NOT NULL,                        -- the JSON body, as the family rendered it
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at DOUBLE PRECISION NOT NULL,         -- not sent before (backoff after a failure)
    lease_owner TEXT,                          -- instance sending it now
    lease_until DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX task_callbacks_due ON task_callbacks (next_at);
CREATE INDEX task_callbacks_task ON task_callbacks (task_id, id);
