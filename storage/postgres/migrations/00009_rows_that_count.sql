-- The rows that can count toward a grant's countMax: receipts whose
-- receipt_signature check passed (ledger.Row.ReceiptVerified). A grant's
-- countMax check lists them (ledger.Query.Signed) through a partial
-- index of them by grant, so that the rows no signature vouches for,
-- which any writer can post under a customer's grant, are never read
-- (docs/design/012). The ledger sets counts when it inserts a row; a
-- row's checks never change after. The rows stored before are marked by
-- `ledgerd migrate` right after this migration, from their bodies, in
-- transactions of a bounded number of rows in id order (migrate.go,
-- backfillCounts): ledger_backfill records how far it got while rows
-- remain, and ledgerd refuses to start until it is gone.

-- +goose Up

ALTER TABLE ledger_rows ADD COLUMN counts boolean NOT NULL DEFAULT false;
CREATE INDEX ledger_rows_counts_by_grant ON ledger_rows (grant_id, issued_ns, id) WHERE counts;

CREATE TABLE ledger_backfill (
    name  text COLLATE "C" PRIMARY KEY,
    after text COLLATE "C" NOT NULL
);
INSERT INTO ledger_backfill (name, after) SELECT 'counts', '' WHERE EXISTS (SELECT FROM ledger_rows);
