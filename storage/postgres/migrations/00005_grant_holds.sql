-- A grant's hold (ledger.Rows HoldGrant): a write that counts the rows
-- under a grant (countMax), records its revocation or sweeps a row of it
-- first locks the grant's row here, so that such writes under one grant
-- run one after the other. A grant's row is the bucket its name hashes to
-- (grantBucket): the table keeps its 65,536 rows however many grants
-- there are, and two grants that share one only hold each other up.

-- +goose Up

CREATE TABLE grant_holds (
    bucket integer PRIMARY KEY
);

INSERT INTO grant_holds (bucket) SELECT generate_series(0, 65535);
