-- The roll-ups of 0011 without the user and the key (issue 34 point 3): what dashboards and log
-- totals over everyone read, a few rows per hour and model instead of one per key and model. Kept
-- in the same transactions as the rest (gateway.storage.sql_rollup). The per-key roll-ups get
-- indexes for the queries about one user or one key.
CREATE TABLE usage_totals (
    span_s INTEGER NOT NULL,
    start_s BIGINT NOT NULL,
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
    PRIMARY KEY (span_s, start_s, model, user_group, status)
) {without_rowid};

INSERT INTO usage_totals (span_s, start_s, model, user_group, status, calls, stream_calls, prompt_tokens,
    completion_tokens, cache_write_tokens, cache_read_tokens, reasoning_tokens, charge_nano, uncharged_nano,
    use_time_ms)
SELECT span_s, start_s, model, user_group, status, SUM(calls), SUM(stream_calls), SUM(prompt_tokens),
    SUM(completion_tokens), SUM(cache_write_tokens), SUM(cache_read_tokens), SUM(reasoning_tokens),
    SUM(charge_nano), SUM(uncharged_nano), SUM(use_time_ms)
FROM usage_rollups
GROUP BY span_s, start_s, model, user_group, status;

CREATE INDEX usage_rollups_user ON usage_rollups (span_s, user_id, start_s);
CREATE INDEX usage_rollups_key ON usage_rollups (span_s, key_id, start_s);
