-- The response cache (issue 36 point 4, CONTRACT 7; plugins/cache): an identical generation of the
-- same user within the TTL is answered from here. `cache_key` is the sha256 of the user id, model,
-- family and the canonicalised body minus `stream`, so an entry is never another user's; `entry`
-- the kept answer (canonical JSON) with its usage and the model that served it; `size_bytes` its
-- length, which the `max_bytes` bound counts; `created_at` orders both the TTL and the
-- oldest-first eviction. `cache_responses` turns the cache on for one key when the config leaves
-- it off for everyone.

CREATE TABLE response_cache (
    cache_key TEXT NOT NULL PRIMARY KEY,
    user_id BIGINT NOT NULL,
    entry TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
) {without_rowid};
CREATE INDEX response_cache_created ON response_cache (created_at);
CREATE INDEX response_cache_user ON response_cache (user_id);
ALTER TABLE api_keys ADD COLUMN cache_responses BOOLEAN NOT NULL DEFAULT FALSE;
