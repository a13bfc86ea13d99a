-- An outbox entry that operates on a stored object (a hold, a release or
-- an extension: an entry with an op) names that object (op_key;
-- '' for a put), so that an uploader claims such an entry only once no
-- earlier operation on the object is queued: operations on one object
-- keep their order when several replicas' uploaders claim at once. (An
-- operation waits for its object's put as before, in the uploader.)

-- +goose Up

ALTER TABLE outbox ADD COLUMN op_key text COLLATE "C" NOT NULL DEFAULT '';
UPDATE outbox SET op_key = coalesce(convert_from(body, 'UTF8')::json->>'key', '')
WHERE coalesce(convert_from(body, 'UTF8')::json->>'op', '') <> '';
CREATE INDEX outbox_ops_by_key ON outbox (op_key, seq) WHERE op_key <> '';
