package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// bucketTimeout bounds the audit's listings of the bucket (a request per
// thousand versions; a busy ledger publishes twice a second) and its
// reads of tile versions; each read of a checkpoint has --timeout.
const bucketTimeout = 30 * time.Minute

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
// audit before the ledger's latest checkpoint (ledgerd signs before it
// publishes, so an honest bucket is never ahead of what the audit reads
// after it): every version of its level-0 hash tiles, each compared with
// the ledger's leaf hashes as the audit reads them (compareTile), the
// leaves they cover without a gap, and its checkpoints.
type bucketWitness struct {
	st       *s3.Store
	name     string
	covered  int64                   // the leaves its tiles cover from leaf 0 without a gap
	gapAt    int64                   // the first tile past covered that the bucket holds (-1: none)
	tiles    map[int64][]tileVersion // the versions not compared yet, by tile number
	versions int                     // tile versions listed
	compared int                     // tile versions compared
	edge     string                  // the key of the widest tile at the log's right edge
	widest   map[int64]int           // the widest version of each tile, by number
	hidden   []string                // keys whose latest version is a delete marker
	extra    []string                // keys of checkpoints by size whose versions hold other bytes
	crowded  []string                // tile keys that hold more than maxTileVersions versions
	live     bool                    // log/checkpoint has a version that is no delete marker
	// checkpoints are those read (each distinct one once, newest first,
	// up to maxCheckpointReads without --all) of the versions of
	// log/checkpoint and of the keys log/checkpoints/<size>; listed
	// counts the versions listed.
	checkpoints []bucketCheckpoint
	listed      int
	all         bool // every checkpoint read (--all)
	mismatches  int  // the audit's mismatches before finishBucket's
}

type bucketCheckpoint struct {
	key, version string
	raw          []byte
}

// tileVersion is one version of a level-0 tile the bucket keeps, as
// little of it as the comparison needs (a busy ledger's bucket holds
// millions): its width, its size and its entity tag when that is an MD5.
// Its key is the tile's; its version id is listed again when it is read
// or named (versionsOf).
type tileVersion struct {
	width  uint16
	tagged bool // md5 holds the entity tag
	size   int32
	md5    [md5.Size]byte
}

func newTileVersion(width int, v s3.Version) tileVersion {
	tv := tileVersion{width: uint16(width), size: int32(min(v.Size, 1<<30))}
	if tag, err := hex.DecodeString(v.ETag); err == nil && len(tag) == md5.Size {
		tv.tagged = true
		copy(tv.md5[:], tag)
	}
	return tv
}

// versionsOf lists the ids of key's versions, newest first, that the
// tile version tv may be: those of its size whose entity tag is its own.
func (b *bucketWitness) versionsOf(ctx context.Context, key string, tv tileVersion) ([]string, error) {
	var ids []string
	err := b.st.ListVersions(ctx, key, func(v s3.Version) error {
		if v.Key == key && !v.DeleteMarker && v.Size == int64(tv.size) && newTileVersion(int(tv.width), v) == tv {
			ids = append(ids, v.VersionID)
		}
		return nil
	})
	return ids, err
}

// named is key with the ids of the versions tv may be, for a mismatch.
func (b *bucketWitness) named(ctx context.Context, key string, tv tileVersion) string {
	ids, err := b.versionsOf(ctx, key, tv)
	if err != nil || len(ids) == 0 {
		return key
	}
	return fmt.Sprintf("%s (version %s)", key, strings.Join(ids, ", "))
}

// maxCheckpointReads bounds the checkpoints the audit reads from the
// bucket without --all: the newest, one read each, checkpointReaders at
// once. A ledger publishes one a round while its log grows
// (merkleLog.interval): a busy one twice a second.
var maxCheckpointReads = 2_000

const checkpointReaders = 8

// maxPastNamed bounds the tile versions past the ledger's log named one
// by one; the rest are counted.
const maxPastNamed = 10

// maxTileVersions bounds the versions of one tile key the audit keeps to
// compare: the ledger puts a tile once (a publication redone after a
// crash puts the same bytes, which the bucket takes as no new version),
// so more are someone else's puts, and a mismatch.
const maxTileVersions = 8

// level0 is the tile a key of a level-0 hash tile names ("log/tile/0/…"),
// when it is written as the ledger writes it.
func level0(key string) (tlog.Tile, bool) {
	rest, ok := strings.CutPrefix(key, ledger.LogPrefix+"tile/0/")
	if !ok {
		return tlog.Tile{}, false
	}
	t, err := tlog.ParseTilePath("tile/8/0/" + rest)
	if err != nil || t.H != tileHeight || t.L != 0 || tileKey(t) != key {
		return tlog.Tile{}, false
	}
	return t, true
}

// tileKey is the bucket's key of a hash tile.
func tileKey(t tlog.Tile) string { return ledger.LogPrefix + c2spPath(t) }

// c2spPath is the C2SP path of a hash tile: x/mod's path without the
// height element, which C2SP fixes at 8.
func c2spPath(t tlog.Tile) string { return strings.Replace(t.Path(), "tile/8/", "tile/", 1) }

// keptSize is the size a kept checkpoint says, read before its
// signature is checked (the audit checks it after): how far the bucket
// must reach.
func keptSize(raw []byte) int64 {
	text, _, ok := strings.Cut(string(raw), "\n\n")
	if !ok {
		return 0
	}
	cp, err := proof.ParseCheckpoint(text + "\n")
	if err != nil {
		return 0
	}
	return cp.Size
}

// read reads what the bucket holds of the log, before the ledger's
// latest checkpoint is read: every version of its checkpoints and of
// its level-0 tiles, listed (one request per thousand), and the
// checkpoints themselves. It waits up to settle for the tiles to cover
// the kept checkpoint's want leaves. all reads every checkpoint.
func (b *bucketWitness) read(c *cli, st *s3.Store, name string, want int64, all bool, settle time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout+settle)
	defer cancel()
	var cps []s3.Version
	for deadline := time.Now().Add(settle); ; {
		*b = bucketWitness{st: st, name: name, tiles: map[int64][]tileVersion{}, gapAt: -1, all: all}
		var err error
		// The checkpoints first: a publication puts its tiles before
		// them, so the tiles listed after hold every checkpoint's leaves.
		if cps, err = b.listCheckpoints(ctx, all); err != nil {
			return fmt.Errorf("read the log in the bucket %s: %w", name, err)
		}
		if err := b.listTiles(ctx); err != nil {
			return fmt.Errorf("read the log in the bucket %s: %w", name, err)
		}
		if b.covered >= want || !time.Now().Before(deadline) {
			break
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	// Each distinct checkpoint once (log/checkpoint's version of a
	// publication holds the bytes of its log/checkpoints/<size>), newest
	// first, read by readers at once, each read bounded by --timeout.
	slices.SortStableFunc(cps, func(x, y s3.Version) int { return y.LastModified.Compare(x.LastModified) })
	seen := map[string]bool{}
	var read []s3.Version
	for _, v := range cps {
		if v.ETag != "" && seen[v.ETag] {
			continue
		}
		seen[v.ETag] = true
		if !all && len(read) == maxCheckpointReads {
			break
		}
		read = append(read, v)
	}
	b.checkpoints = make([]bucketCheckpoint, len(read))
	errs := make([]error, len(read))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(checkpointReaders, len(read)) {
		wg.Go(func() {
			for i := range next {
				v := read[i]
				ctx, cancel := context.WithTimeout(ctx, c.timeout)
				raw, err := st.GetRangeVersion(ctx, v.Key, v.VersionID, 0, maxCheckpointBytes)
				cancel()
				if err != nil {
					errs[i] = fmt.Errorf("read the bucket's %s (version %s): %w", v.Key, v.VersionID, err)
					continue
				}
				b.checkpoints[i] = bucketCheckpoint{key: v.Key, version: v.VersionID, raw: raw}
			}
		})
	}
	for i := range read {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	printf(c.out, "bucket %s (read here, Object Lock on): its level-0 tiles cover %d leaves from leaf 0 without a gap; %d versions of them listed, to compare with the ledger's leaves; %d versions of its checkpoints listed, %d checkpoints read\n", name, b.covered, b.versions, b.listed, len(b.checkpoints))
	return nil
}

// listCheckpoints lists every version of log/checkpoint and of the keys
// log/checkpoints/<size>, returning the newest (every one with all) and
// counting them all, noting the keys a delete marker hides and the
// keys by size whose versions hold other bytes (the ledger puts each
// once; a put again over a delete marker holds the same bytes).
func (b *bucketWitness) listCheckpoints(ctx context.Context, all bool) ([]s3.Version, error) {
	live, bySize := ledger.LogPrefix+"checkpoint", ledger.LogPrefix+"checkpoints/"
	var out []s3.Version
	// S3 lists a key's versions one after another: the key listed last
	// and the entity tag of its first version are all the check of other
	// bytes needs to hold.
	var lastKey, lastTag string
	err := b.st.ListVersions(ctx, live, func(v s3.Version) error {
		if n, ok := strings.CutPrefix(v.Key, bySize); ok {
			if size, err := strconv.ParseInt(n, 10, 64); err != nil || strconv.FormatInt(size, 10) != n {
				return nil // not a key the ledger writes
			}
		} else if v.Key != live {
			return nil
		}
		if v.DeleteMarker {
			if v.Latest {
				b.hidden = append(b.hidden, v.Key)
			}
			return nil
		}
		switch {
		case v.Key != lastKey:
			lastKey, lastTag = v.Key, v.ETag
		case v.ETag != lastTag && v.Key != live && (len(b.extra) == 0 || b.extra[len(b.extra)-1] != v.Key):
			b.extra = append(b.extra, v.Key)
		}
		b.live = b.live || v.Key == live
		b.listed++
		out = append(out, v)
		if !all && len(out) >= 8*maxCheckpointReads {
			// The newest, for read: two versions a publication hold one
			// checkpoint's bytes.
			slices.SortStableFunc(out, func(x, y s3.Version) int { return y.LastModified.Compare(x.LastModified) })
			out = slices.Delete(out, 4*maxCheckpointReads, len(out))
		}
		return nil
	})
	return out, err
}

// listTiles lists every version of the level-0 tiles, keeping each one
// for compareTile (up to maxTileVersions of a key), and finds the leaves
// they cover from leaf 0 without a gap.
func (b *bucketWitness) listTiles(ctx context.Context) error {
	widest := map[int64]int{}
	b.widest = widest
	// S3 lists a key's versions one after another: the key listed last
	// and its versions so far are all the count needs to hold.
	var lastKey string
	var versions int
	var edge tlog.Tile
	err := b.st.ListVersions(ctx, ledger.LogPrefix+"tile/0/", func(v s3.Version) error {
		t, ok := level0(v.Key)
		switch {
		case !ok:
			return nil // not a key the ledger writes
		case v.DeleteMarker:
			if v.Latest {
				b.hidden = append(b.hidden, v.Key)
			}
			return nil
		case v.Latest && (t.N > edge.N || t.N == edge.N && t.W > edge.W):
			edge, b.edge = t, v.Key
		}
		if v.Key != lastKey {
			lastKey, versions = v.Key, 0
		}
		if versions++; versions > maxTileVersions {
			if versions == maxTileVersions+1 {
				b.crowded = append(b.crowded, v.Key)
			}
			return nil
		}
		b.versions++
		widest[t.N] = max(widest[t.N], t.W)
		b.tiles[t.N] = append(b.tiles[t.N], newTileVersion(t.W, v))
		return nil
	})
	if err != nil {
		return err
	}
	n := int64(0)
	for widest[n] == 1<<tileHeight {
		n++
	}
	b.covered = n<<tileHeight + int64(widest[n])
	if widest[n] > 0 {
		n++
	}
	for m := range widest {
		if m >= n && (b.gapAt < 0 || m < b.gapAt) {
			b.gapAt = m
		}
	}
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
		key := tileKey(tlog.Tile{H: tileHeight, L: 0, N: n, W: int(v.width)})
		if int(v.width) > len(hs) {
			a.mismatch("the bucket's %s holds %d leaves of tile %d, and the ledger's latest checkpoint (size %d) %d: the ledger's log was rolled back, or is not the one it published", b.named(ctx, key, v), v.width, n, a.newer.Size, len(hs))
			continue
		}
		prefix := want[:int(v.width)*tlog.HashSize]
		if int(v.size) != len(prefix) {
			a.mismatch("the bucket's %s holds %d bytes, not the %d hashes its name says", b.named(ctx, key, v), v.size, v.width)
			continue
		}
		if v.tagged && md5.Sum(prefix) == v.md5 {
			continue
		}
		// Another tag: read each version it may be.
		ids, err := b.versionsOf(ctx, key, v)
		if err != nil {
			return fmt.Errorf("list the bucket's %s: %w", key, err)
		}
		for _, id := range ids {
			data, err := b.st.GetRangeVersion(ctx, key, id, 0, maxTileBytes)
			if err != nil {
				return fmt.Errorf("read the bucket's %s (version %s): %w", key, id, err)
			}
			if bytes.Equal(data, prefix) {
				continue
			}
			i := 0
			for i < int(v.width) && (i+1)*tlog.HashSize <= len(data) && bytes.Equal(data[i*tlog.HashSize:(i+1)*tlog.HashSize], prefix[i*tlog.HashSize:(i+1)*tlog.HashSize]) {
				i++
			}
			a.mismatch("the bucket's %s (version %s) holds another hash of leaf %d than the ledger's log: the ledger published another history than the one it shows", key, id, n<<tileHeight+int64(i))
		}
	}
	return nil
}

// finishBucket ends the comparison with the bucket once every leaf was
// read: tiles past the ledger's log, a gap, the checkpoints against the
// ledger's tree, their locks, and what a delete marker hides.
func (a *auditor) finishBucket(kept proof.Checkpoint, key string, keyGiven bool) error {
	b := a.bucket
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bucketTimeout)
	defer cancel()
	out := a.c.out
	newer := a.newer
	b.mismatches = len(a.mismatches)
	past := 0
	for _, n := range slices.Sorted(maps.Keys(b.tiles)) {
		for _, v := range b.tiles[n] {
			if past++; past <= maxPastNamed {
				a.mismatch("the bucket's %s holds leaves from %d on, past the ledger's latest checkpoint (size %d): the ledger's log was rolled back, or is not the one it published", b.named(ctx, tileKey(tlog.Tile{H: tileHeight, L: 0, N: n, W: int(v.width)}), v), n<<tileHeight, newer.Size)
			}
		}
	}
	if past > maxPastNamed {
		a.mismatch("and %d more versions of the bucket's tiles past the ledger's latest checkpoint", past-maxPastNamed)
	}
	gap := ""
	if b.gapAt >= 0 {
		gap = fmt.Sprintf(" (it holds no tile of leaf %d, and holds tiles from leaf %d on)", b.covered, b.gapAt<<tileHeight)
	}
	if kept.Size > b.covered {
		a.mismatch("the bucket's tiles cover %d leaves from leaf 0%s, fewer than the kept checkpoint's %d: ledgerd has not published its log to this bucket since (its /readyz says why), or publishes it to another, or tiles it published are gone", b.covered, gap, kept.Size)
	}
	for _, k := range b.extra {
		a.mismatch("the bucket's %s holds versions of other bytes: the ledger puts it once, so someone else put the others", k)
	}
	for _, k := range b.crowded {
		a.mismatch("the bucket's %s holds more than %d versions (the first %d compared): the ledger puts it once, so someone else put the others", k, maxTileVersions, maxTileVersions)
	}
	var largest proof.Checkpoint
	for _, bc := range b.checkpoints {
		cp, err := proof.Open(bc.raw, key)
		if err != nil {
			a.mismatch("the bucket's %s (version %s) does not verify with %s: %v", bc.key, bc.version, keySource(keyGiven), err)
			continue
		}
		switch {
		case cp.Size > newer.Size:
			a.mismatch("the bucket's %s (version %s), signed with the log's key, has %d leaves, more than the ledger's latest checkpoint (%d): the ledger's log was rolled back", bc.key, bc.version, cp.Size, newer.Size)
		case cp.Size > b.covered:
			a.mismatch("the bucket's %s (version %s) has %d leaves, more than its tiles cover from leaf 0%s (%d): tiles it was published with are gone", bc.key, bc.version, cp.Size, gap, b.covered)
		default:
			root, err := tlog.TreeHash(cp.Size, a.hashes)
			var fetch *fetchError
			switch {
			case errors.As(err, &fetch):
				return err
			case err != nil:
				a.mismatch("the ledger's tiles at the size of the bucket's %s (%d): %v", bc.key, cp.Size, err)
			case root != cp.Hash:
				a.mismatch("the bucket's %s (version %s), signed with the log's key, has root %s at size %d, and the ledger's log %s: the ledger signed two histories", bc.key, bc.version, rootText(cp.Hash), cp.Size, rootText(root))
			case cp.Size >= largest.Size:
				largest = cp
			}
		}
	}
	if largest.Size > 0 {
		printf(out, "bucket: its largest checkpoint read, of the ledger's log: size %d, root %s\n", largest.Size, rootText(largest.Hash))
	}
	// The latest version of each key the check relies on must be locked
	// for good: the log's right edge, its first tile, the kept
	// checkpoint's last tile, and the checkpoints. A key a delete marker hides is a mismatch already; its
	// lock is not read (not every S3 server reports the lock of a
	// version that is not its key's latest).
	locked := []string{b.edge}
	for _, n := range []int64{0, max(kept.Size-1, 0) >> tileHeight} {
		if w := b.widest[n]; w > 0 && !slices.Contains(locked, tileKey(tlog.Tile{H: tileHeight, L: 0, N: n, W: w})) {
			locked = append(locked, tileKey(tlog.Tile{H: tileHeight, L: 0, N: n, W: w}))
		}
	}
	if largest.Size > 0 {
		locked = append(locked, ledger.LogPrefix+"checkpoints/"+strconv.FormatInt(largest.Size, 10))
	}
	if b.live {
		locked = append(locked, ledger.LogPrefix+"checkpoint")
	}
	for _, k := range locked {
		if k == "" || slices.Contains(b.hidden, k) {
			continue
		}
		if err := a.lockedForGood(ctx, b.st, k); err != nil {
			return err
		}
	}
	slices.Sort(b.hidden)
	for _, h := range b.hidden {
		a.mismatch("a delete marker hides the bucket's %s: someone with delete access to the bucket removed it from sight (its locked versions stay behind the marker, and were read)", h)
	}
	printf(out, "bucket: %d versions of its level-0 tiles compared with the ledger's leaf hashes, from leaf 0\n", b.compared)
	if !b.all && len(b.checkpoints) == maxCheckpointReads {
		printf(out, "bucket: its newest %d checkpoints read; older ones not read (--all reads every one)\n", len(b.checkpoints))
	}
	a.bucketFailed = len(a.mismatches) > b.mismatches
	if !a.bucketFailed {
		printf(out, "bucket: every version of its tiles holds the ledger's leaves, and every checkpoint read is of the ledger's log; it holds the log to %d leaves, the largest checkpoint read %d, the ledger's latest checkpoint %d\n", b.covered, largest.Size, newer.Size)
	}
	return nil
}

// lockSlack is how much shorter than ledger.DefaultTileRetention from
// its put a lock may be: the ledger dates a put by its clock, checked
// against the bucket's within minutes.
const lockSlack = 24 * time.Hour

// lockedForGood finds a mismatch in a key of the log whose latest
// version the bucket keeps under less than the ledger puts it under:
// COMPLIANCE retention for ledger.DefaultTileRetention from its put. A
// version anyone may delete (none, or past its date), whoever may bypass
// GOVERNANCE may, or one locked for less, which whoever put it so can
// remove once its lock ends, with a rewritten log put in its place.
func (a *auditor) lockedForGood(ctx context.Context, st *s3.Store, key string) error {
	mode, until, put, err := st.Retention(ctx, key, "")
	if err != nil {
		return err
	}
	switch {
	case mode == "":
		a.mismatch("the bucket's %s is under no retention: anyone who may delete in the bucket can remove it", key)
	case mode != "COMPLIANCE":
		a.mismatch("the bucket's %s is under %s retention until %s, not COMPLIANCE: whoever may bypass it can remove it", key, mode, until.Format(time.RFC3339))
	case until.Sub(put) < ledger.DefaultTileRetention-lockSlack:
		a.mismatch("the bucket's %s, put at %s, is retained until %s only, not the %d years the ledger retains what it publishes for: whoever put it so can remove it then, and put a rewritten log in its place", key, put.Format(time.RFC3339), until.Format(time.RFC3339), int(ledger.DefaultTileRetention/(365*24*time.Hour)))
	case !until.After(time.Now()):
		a.mismatch("the bucket's %s was retained until %s only: it can be removed now", key, until.Format(time.RFC3339))
	}
	return nil
}
