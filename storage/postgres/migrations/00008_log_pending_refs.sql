-- A proof asked for a row or event whose leaf is not yet integrated asks
-- whether the leaf is queued by its ref (LeafQueued), one index lookup
-- rather than a read of the whole queue, which grows while no integrator
-- runs.

-- +goose Up

CREATE INDEX log_pending_by_ref ON log_pending (ref);
