-- Documents: small JSON bodies that a plugin keeps on behalf of a user (for example the turns of a
-- server-side conversation), addressed by (kind, id). The core does not interpret ``body``.
-- A deleted document keeps its row as a tombstone (body emptied) so that its id is never reused.

CREATE TABLE documents (
    kind TEXT NOT NULL,                        -- namespace chosen by the plugin, e.g. "response"
    id TEXT NOT NULL,
    user_id BIGINT NOT NULL,                   -- the owner
    body TEXT NOT NULL,                        -- JSON text
    created_at DOUBLE PRECISION NOT NULL,
    deleted BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (kind, id)
);
CREATE INDEX documents_user ON documents (user_id, kind);
