-- The drill pool: the rows the monthly drill may sample get a position,
-- a number from a sequence, so a uniform sample is drawn by probing
-- random positions instead of reading every row (ledger.SampleDrillPool).
-- A row is in the pool when ledger.Drillable holds for it: a receipt
-- (kind 1), not a duplicate (status 4), not read-only (class 3), its
-- evidence kept. The ledger decides at insert; the update below applies
-- the same rule to the rows stored before, from their bodies.

-- +goose Up

CREATE SEQUENCE ledger_rows_pool_seq;
ALTER TABLE ledger_rows ADD COLUMN pool_seq bigint;

UPDATE ledger_rows r SET pool_seq = nextval('ledger_rows_pool_seq')
FROM (SELECT id, convert_from(body, 'UTF8')::jsonb AS j FROM ledger_rows) b
WHERE r.id = b.id
  AND (b.j ->> 'kind')::int = 1
  AND r.status <> 4
  AND r.class <> 3
  AND coalesce(b.j ->> 'evidenceNotKept', '') = '';

CREATE UNIQUE INDEX ledger_rows_by_pool ON ledger_rows (pool_seq) WHERE pool_seq IS NOT NULL;
