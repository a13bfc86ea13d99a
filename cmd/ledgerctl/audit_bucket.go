package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
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

// bucketTimeout bounds the audit's reading of the bucket before the
// leaves (finding how many leaves its tiles cover, its checkpoints, the
// listing of its level-0 tiles' versions), and each read after.
const bucketTimeout = 5 * time.Minute

// maxCheckpointBytes bounds a checkpoint read from the bucket: the
// ledger's are a few hundred bytes. A level-0 tile is at most 256
// hashes.
const (
	maxCheckpointBytes = 16 << 10
	maxTileBytes       = (1 << tileHeight) * tlog.HashSize
)

// splitView says what a ledger whose log is not the one it published to
// the bucket shows, and what to do.
const splitView = "The bucket is the ledger's write-once record: every version of each tile and checkpoint it published there stays, locked, whatever is done to the ledger's own files or to the bucket's latest versions. " +
	"A ledger whose log is not the one those versions hold shows you another history than the one it published: a split view, as when its row store was restored from an older backup and its log rewritten, published over the old one or to another bucket. " +
	"Keep this output, the kept checkpoint and the bucket's keys and versions it names: they are the evidence. Ask the operator what was restored, and which bucket ledgerd publishes to now."

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

// bucketWitness is the log as the ledger's bucket holds it, read by the
// audit: the leaves its level-0 hash tiles cover (hidden versions
// included), its checkpoints, and every version of its level-0 tiles
// from the kept checkpoint's tile on, each compared with the ledger's
// leaf hashes as the audit reads them (compareTile).
type bucketWitness struct {
	st       *s3.Store
	name     string
	covered  int64
	from     int64                   // the first tile whose versions are compared
	tiles    map[int64][]tileVersion // the versions not compared yet, by tile number
	versions int                     // versions listed from from on
	compared int                     // versions compared
	edge     string                  // the key of the widest tile at the log's right edge
	hidden   []string                // keys a delete marker hides
	// checkpoints are the signed checkpoints read: log/checkpoint (or the
	// newest version a delete marker hides), and the one kept by the size
	// the tiles cover when there is one.
	checkpoints []bucketCheckpoint
	mismatches  int // the audit's mismatches before the bucket's
}

type bucketCheckpoint struct {
	key, version string // version "" for the latest
	raw          []byte
}

// tileVersion is one version of a level-0 tile the bucket keeps.
type tileVersion struct {
	width              int
	key, version, etag string
	size               int64
}

// errKeptFound ends a listing of a key's versions once it was found.
var errKeptFound = errors.New("found")

// kept reads up to max bytes of key's newest version that is not a
// delete marker, hidden or not (false: the bucket keeps none), and its
// version when a delete marker hides it ("" when it is the latest).
func (b *bucketWitness) kept(ctx context.Context, key string, max int64) ([]byte, string, bool, error) {
	raw, err := b.st.GetRange(ctx, key, 0, max)
	if err == nil {
		return raw, "", true, nil
	}
	if !errors.Is(err, ledger.ErrNotFound) {
		return nil, "", false, err
	}
	var found *ledger.KeptKey
	if err := b.st.ListKept(ctx, key, func(k ledger.KeptKey) error {
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
	raw, err = b.st.GetRangeVersion(ctx, key, found.Version, 0, max)
	if err != nil {
		return nil, "", false, err
	}
	if found.Hidden && !slices.Contains(b.hidden, key) {
		b.hidden = append(b.hidden, key)
	}
	return raw, found.Version, true, nil
}

// level0 is the tile a key of a level-0 hash tile names ("log/tile/0/…").
func level0(key string) (tlog.Tile, bool) {
	rest, ok := strings.CutPrefix(key, ledger.LogPrefix+"tile/0/")
	if !ok {
		return tlog.Tile{}, false
	}
	t, err := tlog.ParseTilePath("tile/8/0/" + rest)
	if err != nil || t.H != tileHeight || t.L != 0 {
		return tlog.Tile{}, false
	}
	return t, true
}

// readBucket reads what the bucket holds of the log before the leaves
// are read: how many leaves its tiles cover (waiting up to settle for
// them to reach the kept checkpoint: ledgerd publishes after it signs),
// its checkpoints, and the versions of its level-0 tiles from the kept
// checkpoint's tile (from first, 0 with --all) on.
func (a *auditor) readBucket(st *s3.Store, name string, kept proof.Checkpoint, first int64, settle time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout+settle)
	defer cancel()
	b := &bucketWitness{st: st, name: name, from: first >> tileHeight, tiles: map[int64][]tileVersion{}, mismatches: len(a.mismatches)}
	for deadline := time.Now().Add(settle); ; {
		var err error
		// From 0, not from a checkpoint's size: the tiles are the record,
		// whatever log/checkpoint says.
		if b.covered, err = ledger.TilesCovered(ctx, st, 0); err != nil {
			return fmt.Errorf("read the log in the bucket %s: %w", name, err)
		}
		if b.covered >= kept.Size || !time.Now().Before(deadline) {
			break
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	keys := []string{ledger.LogPrefix + "checkpoint"}
	if b.covered > 0 {
		keys = append(keys, ledger.LogPrefix+"checkpoints/"+strconv.FormatInt(b.covered, 10))
	}
	for _, key := range keys {
		raw, version, ok, err := b.kept(ctx, key, maxCheckpointBytes)
		if err != nil {
			return fmt.Errorf("read the log in the bucket %s: %w", name, err)
		}
		if ok {
			b.checkpoints = append(b.checkpoints, bucketCheckpoint{key: key, version: version, raw: raw})
		}
	}
	var edge tlog.Tile
	if err := st.ListVersions(ctx, ledger.LogPrefix+"tile/0/", func(v s3.Version) error {
		t, ok := level0(v.Key)
		switch {
		case !ok:
			return nil // not a key the ledger writes
		case v.DeleteMarker:
			if v.Latest && !slices.Contains(b.hidden, v.Key) {
				b.hidden = append(b.hidden, v.Key)
			}
			return nil
		case v.Latest && (t.N > edge.N || t.N == edge.N && t.W > edge.W):
			edge, b.edge = t, v.Key
		}
		if t.N < b.from {
			return nil
		}
		b.versions++
		b.tiles[t.N] = append(b.tiles[t.N], tileVersion{width: t.W, key: v.Key, version: v.VersionID, etag: v.ETag, size: v.Size})
		return nil
	}); err != nil {
		return fmt.Errorf("read the log in the bucket %s: %w", name, err)
	}
	printf(a.c.out, "bucket %s (read here, Object Lock on): its tiles cover %d leaves; %d versions of its level-0 tiles from leaf %d on, to compare with the ledger's leaves\n", name, b.covered, b.versions, b.from<<tileHeight)
	a.bucket = b
	return nil
}

// compareTile compares each version the bucket keeps of level-0 tile n
// with hs, the ledger's hashes of its leaves (those of its latest
// checkpoint's tree): each must hold the first of them, as many as its
// width says. The version's entity tag is compared with the MD5 of
// those hashes first; one that differs (an object encrypted with a KMS
// key has another tag) is read and compared byte for byte.
func (a *auditor) compareTile(n int64, hs []tlog.Hash) error {
	b := a.bucket
	if b == nil {
		return nil
	}
	versions := b.tiles[n]
	delete(b.tiles, n)
	if len(versions) == 0 {
		return nil
	}
	want := make([]byte, 0, len(hs)*tlog.HashSize)
	for _, h := range hs {
		want = append(want, h[:]...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout)
	defer cancel()
	for _, v := range versions {
		b.compared++
		if v.width > len(hs) {
			a.mismatch("the bucket's %s (version %s) holds %d leaves of tile %d, and the ledger's latest checkpoint (size %d) %d: the ledger's log was rolled back, or is not the one it published", v.key, v.version, v.width, n, a.newer.Size, len(hs))
			continue
		}
		prefix := want[:v.width*tlog.HashSize]
		if v.size != int64(len(prefix)) {
			a.mismatch("the bucket's %s (version %s) holds %d bytes, not the %d hashes its name says", v.key, v.version, v.size, v.width)
			continue
		}
		if sum := md5.Sum(prefix); hex.EncodeToString(sum[:]) == strings.ToLower(v.etag) {
			continue
		}
		data, err := b.st.GetRangeVersion(ctx, v.key, v.version, 0, maxTileBytes)
		if err != nil {
			return fmt.Errorf("read the bucket's %s (version %s): %w", v.key, v.version, err)
		}
		if bytes.Equal(data, prefix) {
			continue
		}
		i := 0
		for i < v.width && (i+1)*tlog.HashSize <= len(data) && bytes.Equal(data[i*tlog.HashSize:(i+1)*tlog.HashSize], prefix[i*tlog.HashSize:(i+1)*tlog.HashSize]) {
			i++
		}
		a.mismatch("the bucket's %s (version %s) holds another hash of leaf %d than the ledger's log: the ledger published another history than the one it shows", v.key, v.version, n<<tileHeight+int64(i))
	}
	return nil
}

// finishBucket ends the comparison with the bucket once every leaf was
// read: tiles past the ledger's log, the checkpoints against the
// ledger's tree, their locks, and what a delete marker hides.
func (a *auditor) finishBucket(kept proof.Checkpoint, key string, keyGiven bool, settle time.Duration) error {
	b := a.bucket
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout)
	defer cancel()
	out := a.c.out
	newer := a.newer
	past := slices.Sorted(func(yield func(int64) bool) {
		for n := range b.tiles {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range past {
		for _, v := range b.tiles[n] {
			a.mismatch("the bucket's %s (version %s) holds leaves from %d on, past the ledger's latest checkpoint (size %d): the ledger's log was rolled back, or is not the one it published", v.key, v.version, n<<tileHeight, newer.Size)
		}
	}
	if b.covered > proof.MaxSize {
		a.mismatch("the bucket's tiles cover %d leaves, more than any log reaches", b.covered)
	}
	if kept.Size > b.covered {
		a.mismatch("the bucket's tiles cover %d leaves, fewer than the kept checkpoint's %d (waited %s): ledgerd has not published its log to this bucket since (its /readyz says why), or publishes it to another", b.covered, kept.Size, settle)
	}
	if len(b.checkpoints) == 0 && b.covered > 0 {
		a.mismatch("the bucket keeps no checkpoint of the log its tiles hold, neither log/checkpoint nor log/checkpoints/%d", b.covered)
	}
	for _, bc := range b.checkpoints {
		cp, err := proof.Open(bc.raw, key)
		if err != nil {
			a.mismatch("the bucket's %s does not verify with %s: %v", bc.key, keySource(keyGiven), err)
			continue
		}
		printf(out, "the bucket's %s: size %d, root %s\n", bc.key, cp.Size, rootText(cp.Hash))
		switch {
		case cp.Size > b.covered:
			a.mismatch("the bucket's %s has %d leaves, more than its tiles cover (%d): tiles it was published with are gone", bc.key, cp.Size, b.covered)
		case cp.Size > newer.Size:
			a.mismatch("the bucket's %s, signed with the log's key, has %d leaves, more than the ledger's latest checkpoint (%d): the ledger's log was rolled back", bc.key, cp.Size, newer.Size)
		default:
			root, err := tlog.TreeHash(cp.Size, a.hashes)
			var fetch *fetchError
			switch {
			case errors.As(err, &fetch):
				return err
			case err != nil:
				a.mismatch("the ledger's tiles at the size of the bucket's %s (%d): %v", bc.key, cp.Size, err)
			case root != cp.Hash:
				a.mismatch("the bucket's %s, signed with the log's key, has root %s at size %d, and the ledger's log %s: the ledger signed two histories", bc.key, rootText(cp.Hash), cp.Size, rootText(root))
			}
		}
		// A version read from behind a delete marker is a mismatch
		// already; its lock is not read (not every S3 server reports the
		// lock of a version that is not its key's latest).
		if bc.version == "" {
			if err := a.lockedForGood(ctx, b.st, bc.key); err != nil {
				return err
			}
		}
	}
	if b.edge != "" && !slices.Contains(b.hidden, b.edge) {
		if err := a.lockedForGood(ctx, b.st, b.edge); err != nil {
			return err
		}
	}
	slices.Sort(b.hidden)
	for _, h := range b.hidden {
		a.mismatch("a delete marker hides the bucket's %s: someone with delete access to the bucket removed it from sight (its locked versions stay behind the marker, and were read)", h)
	}
	printf(out, "bucket: %d versions of its level-0 tiles from leaf %d on compared with the ledger's leaf hashes (the kept checkpoint's leaves before were compared by the audit that kept it; --all compares every one)\n", b.compared, b.from<<tileHeight)
	a.bucketFailed = len(a.mismatches) > b.mismatches
	if !a.bucketFailed {
		printf(out, "bucket: every version of its level-0 tiles from leaf %d on holds the ledger's leaves, and its checkpoints are of the ledger's log (latest checkpoint size %d)\n", b.from<<tileHeight, newer.Size)
	}
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
