-- The pactledger row store. Migrations only go forward: a later version
-- adds a file, never edits this one.
--
-- Times are nanoseconds since the Unix epoch (bigint), as the ledger
-- writes them; key columns compare bytewise (COLLATE "C") whatever the
-- database's locale. Row bodies and records are the ledger's JSON, stored
-- as written (bytea).

-- +goose Up

-- Rows, with the columns List filters on and their indexes: each serves
-- one filter, newest first, with a time window as a range.
CREATE TABLE ledger_rows (
    id          text COLLATE "C" PRIMARY KEY,
    principal   text COLLATE "C" NOT NULL,
    grant_id    text COLLATE "C" NOT NULL,
    agent       text COLLATE "C" NOT NULL,
    status      smallint NOT NULL,
    class       smallint NOT NULL,
    issued_ns   bigint NOT NULL,
    retain_ns   bigint,
    request_jwt text COLLATE "C" NOT NULL,
    body        bytea NOT NULL
);
CREATE INDEX ledger_rows_by_time ON ledger_rows (issued_ns, id);
CREATE INDEX ledger_rows_by_principal ON ledger_rows (principal, issued_ns, id);
CREATE INDEX ledger_rows_by_grant ON ledger_rows (grant_id, issued_ns, id);
CREATE INDEX ledger_rows_by_agent ON ledger_rows (agent, issued_ns, id);
CREATE INDEX ledger_rows_by_status ON ledger_rows (status, issued_ns, id);
CREATE INDEX ledger_rows_by_class ON ledger_rows (class, issued_ns, id);
CREATE INDEX ledger_rows_by_expiry ON ledger_rows (retain_ns, id) WHERE retain_ns IS NOT NULL;

-- A row's distinct action targets: the target filter of List.
CREATE TABLE row_targets (
    target    text COLLATE "C" NOT NULL,
    issued_ns bigint NOT NULL,
    row_id    text COLLATE "C" NOT NULL,
    PRIMARY KEY (target, issued_ns, row_id)
);

-- The first row that used a request JWT (by its hex SHA-256): never moved
-- to a later row, removed only with that row.
CREATE TABLE request_jwts (
    sha    text COLLATE "C" PRIMARY KEY,
    row_id text COLLATE "C" NOT NULL
);

CREATE TABLE evidence (
    row_id text COLLATE "C" PRIMARY KEY,
    bundle bytea NOT NULL
);

CREATE TABLE tombstones (
    id   text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE snapshots (
    id   text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE snapshot_retain (
    id       text COLLATE "C" PRIMARY KEY,
    until_ns bigint NOT NULL
);

CREATE TABLE revocations (
    grant_id text COLLATE "C" PRIMARY KEY,
    body     bytea NOT NULL
);

-- The evidence outbox, in sequence order; an uploader claims entries for
-- a while (claimed_by, claim_until by the database's clock).
CREATE SEQUENCE outbox_seq;
CREATE TABLE outbox (
    seq         bigint PRIMARY KEY,
    body        bytea NOT NULL,
    queued_ns   bigint NOT NULL,
    claimed_by  text,
    claim_until timestamptz
);

CREATE TABLE outbox_failures (
    seq  bigint PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE dead_letters (
    seq  bigint PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE segment_plans (
    key  text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

-- Where uploaded objects are held, reference counters (holds, segment
-- members, snapshot references) and the objects queued for deletion.
CREATE TABLE objects (
    key  text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE ref_counts (
    kind text COLLATE "C" NOT NULL,
    key  text COLLATE "C" NOT NULL,
    n    bigint NOT NULL,
    PRIMARY KEY (kind, key)
);

CREATE TABLE deletions (
    key  text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

-- Drill reports, incidents and the read-access log.
CREATE TABLE drills (
    id   text COLLATE "C" PRIMARY KEY,
    body bytea NOT NULL
);

CREATE SEQUENCE incident_seq;
CREATE TABLE incidents (
    seq  bigint PRIMARY KEY,
    body bytea NOT NULL
);

CREATE SEQUENCE access_seq;
CREATE TABLE access_log (
    seq   bigint PRIMARY KEY,
    at_ns bigint NOT NULL,
    body  bytea NOT NULL
);

-- The Merkle log: leaves waiting for an index, leaves by index, the index
-- of each ref, stored hashes, signed checkpoints by size, and its head.
CREATE SEQUENCE leaf_seq;
CREATE TABLE log_pending (
    seq  bigint PRIMARY KEY,
    ref  text COLLATE "C" NOT NULL,
    data bytea NOT NULL
);

CREATE TABLE log_leaves (
    idx  bigint PRIMARY KEY,
    ref  text COLLATE "C" NOT NULL,
    data bytea NOT NULL
);

CREATE TABLE log_index (
    ref text COLLATE "C" PRIMARY KEY,
    idx bigint NOT NULL
);

CREATE TABLE log_hashes (
    idx  bigint PRIMARY KEY,
    hash bytea NOT NULL
);

CREATE TABLE log_checkpoints (
    size       bigint PRIMARY KEY,
    checkpoint bytea NOT NULL
);

-- 'head': the tree size (n) and its checkpoint (value); 'tiles': the size
-- whose tiles are all published (n).
CREATE TABLE log_state (
    name  text COLLATE "C" PRIMARY KEY,
    n     bigint NOT NULL,
    value bytea
);

-- Leases of singleton jobs: one holder at a time, expiry by the
-- database's clock, a token that grows with every acquisition.
CREATE TABLE leases (
    name       text COLLATE "C" PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);
