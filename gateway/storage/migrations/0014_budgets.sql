-- Budgets with periods on keys and users (issue 36 point 3, CONTRACT 7). `budget_nano`: what may be
-- spent in one period, NULL for no budget; `budget_period`: 'day', 'week' or 'month' (UTC calendar
-- periods). `budget_spent_nano` is the spend counted since `budget_start`, the Unix start of the
-- period it belongs to: a start that is not the current period's means nothing spent yet in this
-- one (gateway.accounts.budget_periods), so no job has to reset it. A user's `reserved_nano` is the
-- sum of its open holds (a key's has always been kept): a user's budget counts them, as a key's
-- ceiling counts the key's, inside the reservation's own conditional update.

ALTER TABLE api_keys ADD COLUMN budget_nano BIGINT;
ALTER TABLE api_keys ADD COLUMN budget_period TEXT;
ALTER TABLE api_keys ADD COLUMN budget_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN budget_spent_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN budget_nano BIGINT;
ALTER TABLE users ADD COLUMN budget_period TEXT;
ALTER TABLE users ADD COLUMN budget_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN budget_spent_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN reserved_nano BIGINT NOT NULL DEFAULT 0;
UPDATE users SET reserved_nano = COALESCE(
    (SELECT CAST(SUM(r.amount_nano) AS BIGINT) FROM reservations r WHERE r.user_id = users.id), 0);
