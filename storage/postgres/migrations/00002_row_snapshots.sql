-- Snapshot links replace the snapshot reference counters: one entry per
-- row and JWKS snapshot the row names (its brand key's and its agent's),
-- written and removed with the row. A counter shared by every row of a
-- brand kept each write batch waiting for the one before; links are the
-- rows' own. "Is any row naming this snapshot left" is one probe of the
-- primary key, whose first column is the snapshot.

-- +goose Up

CREATE TABLE row_snapshots (
    snapshot_id text COLLATE "C" NOT NULL,
    row_id      text COLLATE "C" NOT NULL,
    PRIMARY KEY (snapshot_id, row_id)
);

-- Link the rows stored before, from their bodies (the ledger's JSON).
INSERT INTO row_snapshots (snapshot_id, row_id)
SELECT DISTINCT s.id, r.id
FROM ledger_rows r,
     LATERAL (SELECT convert_from(r.body, 'UTF8')::jsonb AS j) b,
     LATERAL (VALUES (b.j #>> '{brandKey,jwksSnapshot}'), (b.j #>> '{agent,jwksSnapshot}')) AS s (id)
WHERE s.id IS NOT NULL AND s.id <> '';

-- The counters are no longer kept.
DELETE FROM ref_counts WHERE kind = 'snapshot';
