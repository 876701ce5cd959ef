-- Fewer indexes on the tables every metered call writes (issue 14). A call inserts and deletes a
-- reservation and inserts two ledger rows; each index is one more B-tree written in that commit.
-- No query reads these: the ledger is summed whole by user and by key (`gateway audit`) and read
-- by request id only by hand, and the open reservations are a small table scanned by the orphan
-- sweeper. The uncharged listing reads its kind newest first: a partial index holds just its rows.

DROP INDEX ledger_key;
DROP INDEX ledger_request;
DROP INDEX ledger_kind;
DROP INDEX reservations_instance;
CREATE INDEX ledger_uncharged ON ledger (id) WHERE kind = 'uncharged';
