-- Idempotent mutations (CONTRACT 4c, issue 35): the first answer to each `Idempotency-Key` of a
-- credential, kept 24 hours so that a repeat (a double click, a client's retry after a lost answer)
-- changes nothing and gets that answer again. `scope` is whose key it is ('admin' or 'user:<id>'),
-- `request_hash` what was asked (method, path and body), so the same key with another request is
-- refused. `status` is NULL while the first request is being served: the primary key lets exactly
-- one of several concurrent requests claim a key. `answer` is the body, encrypted with a key derived
-- from the caller's credential (it may hold a secret shown once: a new API key or user token, which
-- the database otherwise keeps only as a hash).

CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status INTEGER,
    answer TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
