-- The task engine (gateway/tasks): what a task costs, when it started and was last asked about,
-- and which gateway process polls it now (a lease with an expiry, so that with several replicas
-- each task is polled by one at a time and a dead replica's tasks are taken over).

ALTER TABLE tasks ADD COLUMN price_nano BIGINT NOT NULL DEFAULT 0;   -- charged on success
ALTER TABLE tasks ADD COLUMN started_at DOUBLE PRECISION;            -- first seen running
ALTER TABLE tasks ADD COLUMN polled_at DOUBLE PRECISION;             -- last answer of the upstream
ALTER TABLE tasks ADD COLUMN lease_owner TEXT;                       -- instance polling it now
ALTER TABLE tasks ADD COLUMN lease_until DOUBLE PRECISION;           -- its lease ends then
ALTER TABLE tasks ADD COLUMN route TEXT NOT NULL DEFAULT '';             -- submit endpoint
CREATE INDEX tasks_upstream_id ON tasks (upstream, upstream_task_id);
