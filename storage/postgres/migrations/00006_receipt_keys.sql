-- A receipt's first row is keyed by the receipt as signed, not as posted:
-- receipt_key is the smaller of the hashes of its two ES256 encodings (the
-- signature and its malleated twin; the row's id when it has no twin), and
-- no two rows that are not duplicates share one. Two replicas recording a
-- receipt and its twin at once then meet on the key, and the later runs
-- again and is found a duplicate. Duplicates and rows stored before have
-- none ('').

-- +goose Up

ALTER TABLE ledger_rows ADD COLUMN receipt_key text COLLATE "C" NOT NULL DEFAULT '';
CREATE UNIQUE INDEX ledger_rows_by_receipt_key ON ledger_rows (receipt_key) WHERE receipt_key <> '';
