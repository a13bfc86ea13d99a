-- A row's request JWT is indexed under the hash of its other ES256
-- encoding (the signature's malleated twin) too, so that two writes
-- posting the twins at once meet on one key of request_jwts and the later
-- is found a duplicate. The row keeps that hash, to remove the entry with
-- the row. Rows stored before keep one entry: a later post of either
-- encoding reads it, as the ledger reads both hashes.

-- +goose Up

ALTER TABLE ledger_rows ADD COLUMN request_jwt_twin text COLLATE "C" NOT NULL DEFAULT '';
