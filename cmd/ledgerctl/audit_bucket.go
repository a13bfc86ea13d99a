package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/s3"
)

// bucketOpts are log audit's --s3-* flags: the bucket with Object Lock
// the ledger publishes its log to, which the audit then reads itself
// rather than take the ledger's word for it.
type bucketOpts struct {
	endpoint, bucket, accessKey, region string
	insecure                            bool
}

func (o bucketOpts) given() bool { return o.endpoint != "" || o.bucket != "" || o.accessKey != "" }

// bucketTimeout bounds the audit's reading of the bucket: a few
// listings for each size the tiles are tried at (ledger.TilesCovered),
// the checkpoints, and the tiles of the hashes compared.
const bucketTimeout = 2 * time.Minute

// splitView says what a ledger whose log is not the one it published to
// the bucket shows, and what to do.
const splitView = "The bucket is the ledger's write-once record: each checkpoint, tile and leaf it published there stays, locked, whatever is done to the ledger's own files. " +
	"A ledger whose log is not an extension of it shows you another history than the one it published: a split view, as when its row store was restored from an older backup and ledgerd was pointed at another bucket, or its log was rewritten. " +
	"Keep this output, the kept checkpoint and the bucket's checkpoints it names: they are the evidence, signed with the log's key. Ask the operator which bucket ledgerd publishes to now, and why."

// openBucket opens the bucket o names, for reading, with the secret from
// PACTLEDGER_S3_SECRET_KEY, and checks it exists with Object Lock on.
func (c *cli) openBucket(ctx context.Context, o bucketOpts) (*s3.Store, error) {
	var missing []string
	for _, f := range []struct{ v, name string }{{o.endpoint, "--s3-endpoint"}, {o.bucket, "--s3-bucket"}, {o.accessKey, "--s3-access-key"}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, usagef("log audit reads the ledger's bucket with --s3-endpoint, --s3-bucket and --s3-access-key together: %s missing", strings.Join(missing, ", "))
	}
	secret := c.getenv(config.EnvS3SecretKey)
	if secret == "" {
		return nil, usagef("set %s to the secret of the access key %s (a key that may read the bucket is enough)", config.EnvS3SecretKey, o.accessKey)
	}
	st, err := s3.New(s3.Config{Endpoint: o.endpoint, Bucket: o.bucket, AccessKey: o.accessKey, SecretKey: secret, Region: o.region, Insecure: o.insecure})
	if err != nil {
		return nil, err
	}
	return st, st.Check(ctx)
}

// bucketLog is the log as the bucket holds it: the leaves its level-0
// hash tiles cover, hidden ones included, and the checkpoints it keeps.
type bucketLog struct {
	st      *s3.Store
	ctx     context.Context
	covered int64
	widths  map[[2]int64]int  // the width of each tile of the tree of covered leaves, by level and number
	read    map[string][]byte // the tiles read, by key
	hidden  []string          // keys a delete marker hides, read from behind it
	// checkpoints are the signed checkpoints read: log/checkpoint (or
	// the newest version a delete marker hides), and the one kept by the
	// size the tiles cover when that is larger.
	checkpoints []bucketCheckpoint
}

type bucketCheckpoint struct {
	key, version string // version "" for the latest
	raw          []byte
}

// errKeptFound ends a listing of a key's versions once it was found.
var errKeptFound = errors.New("found")

// kept reads key's newest version that is not a delete marker, hidden or
// not (false: the bucket keeps none).
func (b *bucketLog) kept(key string) ([]byte, string, bool, error) {
	raw, err := b.st.Get(b.ctx, key)
	if err == nil {
		return raw, "", true, nil
	}
	if !errors.Is(err, ledger.ErrNotFound) {
		return nil, "", false, err
	}
	var found *ledger.KeptKey
	if err := b.st.ListKept(b.ctx, key, func(k ledger.KeptKey) error {
		if k.Key != key {
			return nil
		}
		found = &k
		return errKeptFound
	}); err != nil && !errors.Is(err, errKeptFound) {
		return nil, "", false, err
	}
	if found == nil {
		return nil, "", false, nil
	}
	raw, err = b.st.GetVersion(b.ctx, key, found.Version)
	if err != nil {
		return nil, "", false, err
	}
	if found.Hidden && !slices.Contains(b.hidden, key) {
		b.hidden = append(b.hidden, key)
	}
	return raw, found.Version, true, nil
}

// readBucketLog finds what the bucket holds of the log: its checkpoint,
// how many leaves its tiles cover, and the checkpoint of that size.
func readBucketLog(ctx context.Context, st *s3.Store) (*bucketLog, error) {
	b := &bucketLog{st: st, ctx: ctx, read: map[string][]byte{}}
	live := ledger.LogPrefix + "checkpoint"
	raw, version, ok, err := b.kept(live)
	if err != nil {
		return nil, err
	}
	if ok {
		b.checkpoints = append(b.checkpoints, bucketCheckpoint{key: live, version: version, raw: raw})
	}
	// From 0, not from the checkpoint's size: the tiles are the record,
	// whatever log/checkpoint says.
	if b.covered, err = ledger.TilesCovered(ctx, st, 0); err != nil {
		return nil, err
	}
	if b.covered > 0 {
		bySize := ledger.LogPrefix + "checkpoints/" + strconv.FormatInt(b.covered, 10)
		raw, version, ok, err := b.kept(bySize)
		if err != nil {
			return nil, err
		}
		if ok {
			b.checkpoints = append(b.checkpoints, bucketCheckpoint{key: bySize, version: version, raw: raw})
		}
	}
	b.widths = map[[2]int64]int{}
	for _, t := range tlog.NewTiles(tileHeight, 0, b.covered) {
		b.widths[[2]int64{int64(t.L), t.N}] = t.W
	}
	return b, nil
}

// ReadHashes implements tlog.HashReader from the bucket's tiles of the
// tree of b.covered leaves, as they are: the hashes the audit computes
// from them are compared with signed roots.
func (b *bucketLog) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		t := tlog.TileForIndex(tileHeight, x)
		w, ok := b.widths[[2]int64{int64(t.L), t.N}]
		if !ok || w < t.W {
			return nil, fmt.Errorf("hash %d is beyond the %d leaves the bucket's tiles cover", x, b.covered)
		}
		t.W = w
		key := ledger.LogPrefix + strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		data, ok := b.read[key]
		if !ok {
			raw, _, found, err := b.kept(key)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, fmt.Errorf("the bucket keeps no %s", key)
			}
			data, b.read[key] = raw, raw
		}
		if len(data) != w*tlog.HashSize {
			return nil, fmt.Errorf("the bucket's %s holds %d bytes, not the %d hashes of its width", key, len(data), w)
		}
		h, err := tlog.HashFromTile(t, data, x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// witnessBucket compares the log the bucket holds with the kept
// checkpoint and with the ledger's latest (a.newer, whose tiles a.hashes
// reads): the bucket's checkpoints must verify with key and match its
// tiles, be locked under COMPLIANCE, and both the kept checkpoint and the
// bucket's log must be prefixes of the ledger's log. The bucket may lag
// the ledger (it publishes after it signs); one that has not reached the
// kept checkpoint is waited for up to settle.
func (a *auditor) witnessBucket(st *s3.Store, name string, kept proof.Checkpoint, key string, keyGiven bool, settle time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout+settle)
	defer cancel()
	out := a.c.out
	var b *bucketLog
	for deadline := time.Now().Add(settle); ; {
		var err error
		if b, err = readBucketLog(ctx, st); err != nil {
			return fmt.Errorf("read the log in the bucket %s: %w", name, err)
		}
		if b.covered >= kept.Size || !time.Now().Before(deadline) {
			break
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	failed := len(a.mismatches)
	printf(out, "bucket %s (read here, Object Lock on): its tiles cover %d leaves\n", name, b.covered)
	var largest proof.Checkpoint
	for _, bc := range b.checkpoints {
		cp, err := proof.Open(bc.raw, key)
		if err != nil {
			a.mismatch("the bucket's %s does not verify with %s: %v", bc.key, keySource(keyGiven), err)
			continue
		}
		printf(out, "the bucket's %s: size %d, root %s\n", bc.key, cp.Size, rootText(cp.Hash))
		if cp.Size > b.covered {
			a.mismatch("the bucket's %s has %d leaves, more than its tiles cover (%d): tiles it was published with are gone", bc.key, cp.Size, b.covered)
			continue
		}
		root, err := tlog.TreeHash(cp.Size, b)
		if err != nil {
			a.mismatch("the bucket's tiles of the tree of %s: %v", bc.key, err)
			continue
		}
		if root != cp.Hash {
			a.mismatch("the bucket's tiles hash to root %s at size %d, and its %s says %s", rootText(root), cp.Size, bc.key, rootText(cp.Hash))
			continue
		}
		// A version read from behind a delete marker is a mismatch
		// already; its lock is not read (not every S3 server reports the
		// lock of a version that is not its key's latest).
		if bc.version == "" {
			if err := a.lockedForGood(ctx, st, bc.key); err != nil {
				return err
			}
		}
		if cp.Size >= largest.Size {
			largest = cp
		}
	}
	if len(b.checkpoints) == 0 && b.covered > 0 {
		a.mismatch("the bucket keeps no checkpoint of the log its tiles hold, neither log/checkpoint nor log/checkpoints/%d", b.covered)
	}
	if b.covered > 0 {
		// The newest level-0 tile: locked like the checkpoints.
		t := tlog.TileForIndex(tileHeight, tlog.StoredHashIndex(0, b.covered-1))
		t.W = b.widths[[2]int64{0, t.N}]
		key := ledger.LogPrefix + strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		if _, version, found, err := b.kept(key); err != nil {
			return err
		} else if found && version == "" {
			if err := a.lockedForGood(ctx, st, key); err != nil {
				return err
			}
		}
	}

	// The kept checkpoint, in the bucket's log.
	switch {
	case kept.Size > b.covered:
		a.mismatch("the bucket's tiles cover %d leaves, fewer than the kept checkpoint's %d (waited %s): ledgerd has not published its log to this bucket since (its /readyz says why), or publishes it to another", b.covered, kept.Size, settle)
	case kept.Size > 0:
		root, err := tlog.TreeHash(kept.Size, b)
		switch {
		case err != nil:
			a.mismatch("the bucket's tiles at the kept checkpoint's size %d: %v", kept.Size, err)
		case root != kept.Hash:
			a.mismatch("the bucket's log at the kept checkpoint's size %d has root %s, the kept checkpoint %s: the ledger signed one history and published another", kept.Size, rootText(root), rootText(kept.Hash))
		default:
			printf(out, "bucket: the kept checkpoint (size %d) is a prefix of the log in the bucket (its tiles hash to its root)\n", kept.Size)
		}
	}

	// The bucket's log, in the ledger's.
	newer := a.newer
	at := min(b.covered, newer.Size)
	if at > 0 {
		bucketRoot, err := tlog.TreeHash(at, b)
		if err != nil {
			a.mismatch("the bucket's tiles at size %d: %v", at, err)
		} else if at < b.covered {
			if bucketRoot == newer.Hash {
				a.mismatch("the ledger's latest checkpoint has %d leaves, fewer than the %d it published to the bucket: its log was rolled back", newer.Size, b.covered)
			} else {
				a.mismatch("the ledger's latest checkpoint (size %d, root %s) is not a prefix of the log in the bucket (%d leaves; at size %d its root is %s): the ledger shows another history than the one it published", newer.Size, rootText(newer.Hash), b.covered, at, rootText(bucketRoot))
			}
		} else {
			ledgerRoot, err := tlog.TreeHash(at, a.hashes)
			var fetch *fetchError
			switch {
			case errors.As(err, &fetch):
				return err
			case err != nil:
				a.mismatch("the ledger's tiles at size %d, the bucket's log: %v", at, err)
			case ledgerRoot != bucketRoot:
				a.mismatch("the log in the bucket (%d leaves, root %s) is not a prefix of the ledger's (size %d; at size %d its root is %s): the ledger shows another history than the one it published", b.covered, rootText(bucketRoot), newer.Size, at, rootText(ledgerRoot))
			default:
				printf(out, "bucket: the ledger's latest checkpoint (size %d) extends the log in the bucket (%d leaves, root %s)\n", newer.Size, at, rootText(bucketRoot))
			}
		}
	}
	for _, h := range b.hidden {
		a.mismatch("a delete marker hides the bucket's %s: someone with delete access to the bucket removed it from sight (its locked versions stay behind the marker, and were read)", h)
	}
	if largest.Size > 0 {
		printf(out, "bucket: its largest checkpoint verifies with %s and matches its tiles: size %d\n", keySource(keyGiven), largest.Size)
	}
	a.bucketFailed = len(a.mismatches) > failed
	a.bucketChecked = true
	return nil
}

// lockedForGood finds a mismatch in a key of the log whose latest
// version the bucket keeps under anything less than COMPLIANCE retention
// in force: a version anyone may delete (none, or past its date) or
// whoever may bypass GOVERNANCE may.
func (a *auditor) lockedForGood(ctx context.Context, st *s3.Store, key string) error {
	mode, until, err := st.Retention(ctx, key, "")
	if err != nil {
		return err
	}
	switch {
	case mode == "":
		a.mismatch("the bucket's %s is under no retention: anyone who may delete in the bucket can remove it", key)
	case mode != "COMPLIANCE":
		a.mismatch("the bucket's %s is under %s retention until %s, not COMPLIANCE: whoever may bypass it can remove it", key, mode, until.Format(time.RFC3339))
	case !until.After(time.Now()):
		a.mismatch("the bucket's %s was retained until %s only: it can be removed now", key, until.Format(time.RFC3339))
	}
	return nil
}
