-- Admin operations on users (CONTRACT 4): disable, delete (the row and its history stay), unique
-- names, balance adjustments with a reason, and the everyone's-log query of GET /admin/logs.

ALTER TABLE users ADD COLUMN enabled BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE users ADD COLUMN deleted_at BIGINT;              -- NULL: live; else Unix s of deletion

-- Names become unique among live users. A database made before this rule may hold duplicates:
-- every one but the oldest gets its id appended, so the index can be built.
UPDATE users SET name = name || '#' || CAST(id AS TEXT)
    WHERE id NOT IN (SELECT MIN(id) FROM users GROUP BY name);
CREATE UNIQUE INDEX users_name_live ON users (name) WHERE deleted_at IS NULL;

ALTER TABLE ledger ADD COLUMN note TEXT;                     -- why an admin adjusted a balance

CREATE INDEX request_logs_time ON request_logs (created_at);
