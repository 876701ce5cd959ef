-- Rate limits per key and soft limits (issue 13, CONTRACT 4 and 4b). `rpm` / `tpm`: requests and
-- tokens (input plus output) per minute, NULL for none. `soft_limit_nano`: the alert threshold of a
-- key (on its spent_nano) or of a user (on its used_nano), NULL for none. `soft_alerted_nano`: the
-- threshold whose crossing was last announced, so that each crossing fires once, in one process
-- (a conditional UPDATE claims it); changing the threshold arms it again.

ALTER TABLE api_keys ADD COLUMN rpm BIGINT;
ALTER TABLE api_keys ADD COLUMN tpm BIGINT;
ALTER TABLE api_keys ADD COLUMN soft_limit_nano BIGINT;
ALTER TABLE api_keys ADD COLUMN soft_alerted_nano BIGINT;
ALTER TABLE users ADD COLUMN soft_limit_nano BIGINT;
ALTER TABLE users ADD COLUMN soft_alerted_nano BIGINT;
