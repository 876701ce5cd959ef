-- Hourly and daily roll-ups of the request log (issue 34 point 3), kept in the same transaction as
-- the rows they sum (gateway.storage.sql_rollup), so they never miss or double count a row, and
-- kept when retention prunes the raw rows. `span_s` is 3600 (an hour) or 86400 (a UTC day),
-- `start_s` the span's start in Unix seconds. `user_id` and `key_id` are 0 for a request refused
-- before a valid key was seen; `user_group` is the user's group when the row was written. Errors
-- are the calls whose status is not 2xx (status 0: released after a crash).
CREATE TABLE usage_rollups (
    span_s INTEGER NOT NULL,
    start_s BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    key_id BIGINT NOT NULL,
    model TEXT NOT NULL,
    user_group TEXT NOT NULL,
    status INTEGER NOT NULL,
    calls BIGINT NOT NULL,
    stream_calls BIGINT NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    charge_nano BIGINT NOT NULL,
    uncharged_nano BIGINT NOT NULL,
    use_time_ms BIGINT NOT NULL,
    PRIMARY KEY (span_s, start_s, user_id, key_id, model, user_group, status)
) {without_rowid};

-- Per upstream that answered (or was tried last): calls, errors and latency sums, for the
-- console's upstream latency over time.
CREATE TABLE upstream_rollups (
    span_s INTEGER NOT NULL,
    start_s BIGINT NOT NULL,
    upstream TEXT NOT NULL,
    calls BIGINT NOT NULL,
    errors BIGINT NOT NULL,
    use_time_ms BIGINT NOT NULL,
    first_byte_ms BIGINT NOT NULL,
    first_byte_calls BIGINT NOT NULL,
    PRIMARY KEY (span_s, start_s, upstream)
) {without_rowid};

-- Retention (gateway.storage.sql_usage): every raw row older than `floor_s` is gone; the hour
-- from `floor_s` is being pruned. `holder` / `lease_until`: the one process pruning now.
CREATE TABLE log_retention (
    name TEXT PRIMARY KEY,
    floor_s BIGINT NOT NULL,
    holder TEXT,
    lease_until DOUBLE PRECISION NOT NULL
);
INSERT INTO log_retention (name, floor_s, holder, lease_until) VALUES ('request_logs', 0, NULL, 0);

-- The filters of GET /admin/logs that had no index.
CREATE INDEX request_logs_model_time ON request_logs (model, created_at);
CREATE INDEX request_logs_status_time ON request_logs (status, created_at);

-- The rows already written, rolled up. The floor of a timestamp, written for both dialects
-- (SQLite's CAST truncates, PostgreSQL's rounds).
INSERT INTO usage_rollups (span_s, start_s, user_id, key_id, model, user_group, status, calls, stream_calls,
    prompt_tokens, completion_tokens, cache_write_tokens, cache_read_tokens, reasoning_tokens, charge_nano,
    uncharged_nano, use_time_ms)
SELECT s.span_s, (CAST(l.created_at AS BIGINT) - CASE WHEN CAST(l.created_at AS BIGINT) > l.created_at
        THEN 1 ELSE 0 END) / s.span_s * s.span_s,
    l.user_id, l.key_id, l.model, COALESCE(u.user_group, ''), l.status, COUNT(*),
    SUM(CASE WHEN l.is_stream THEN 1 ELSE 0 END), SUM(l.prompt_tokens), SUM(l.completion_tokens),
    SUM(l.cache_write_tokens), SUM(l.cache_read_tokens), SUM(l.reasoning_tokens), SUM(l.charge_nano),
    SUM(l.uncharged_nano), SUM(l.use_time_ms)
FROM request_logs l
CROSS JOIN (SELECT 3600 AS span_s UNION ALL SELECT 86400) s
LEFT JOIN users u ON u.id = l.user_id
GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO upstream_rollups (span_s, start_s, upstream, calls, errors, use_time_ms, first_byte_ms,
    first_byte_calls)
SELECT s.span_s, (CAST(l.created_at AS BIGINT) - CASE WHEN CAST(l.created_at AS BIGINT) > l.created_at
        THEN 1 ELSE 0 END) / s.span_s * s.span_s,
    l.upstream, COUNT(*), SUM(CASE WHEN l.status >= 200 AND l.status < 300 THEN 0 ELSE 1 END),
    SUM(l.use_time_ms), SUM(COALESCE(l.first_byte_ms, 0)),
    SUM(CASE WHEN l.first_byte_ms IS NULL THEN 0 ELSE 1 END)
FROM request_logs l
CROSS JOIN (SELECT 3600 AS span_s UNION ALL SELECT 86400) s
WHERE l.upstream IS NOT NULL
GROUP BY 1, 2, 3;
