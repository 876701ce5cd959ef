-- Charging what the upstream reports (README "Money"): a call whose actual cost exceeds its
-- reservation takes the excess from what the key's ceiling and the user's balance still allow; the
-- part that could not be charged is recorded on its request log row and as an `uncharged` ledger
-- row (delta, charge and amount 0, so balances and holds are unaffected), never dropped silently.

ALTER TABLE request_logs ADD COLUMN uncharged_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN uncharged_nano BIGINT NOT NULL DEFAULT 0;
CREATE INDEX ledger_kind ON ledger (kind);
